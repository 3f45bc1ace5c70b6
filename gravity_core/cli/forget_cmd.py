"""``gravity forget KB_DIR``: remove utterances from a KB, and everything it knows only from them.

The KB is rebuilt from the remaining utterances with the extractor and embedder it was built with
(:meth:`~gravity_core.build.builder.AnchorBuilder.forget`); the result is one new generation and
every earlier one is deleted, so ``gravity build --rollback`` cannot bring the forgotten text back.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from datetime import date, datetime
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console

from gravity_core.build.builder import AnchorBuilder, ProgressCallback
from gravity_core.build.forget import ForgetReport, ForgetRequest, NothingNamedHeld
from gravity_core.cli.build_cmd import ExtractorKind, _chat_model, _extractor, _progress_bar
from gravity_core.embeddings.base import Embedder
from gravity_core.errors import ConfigurationError
from gravity_core.llm.retry import DEFAULT_MAX_CONCURRENCY, RetryPolicy
from gravity_core.providers import embedder_from_name, load_embedder
from gravity_core.query.question_date import parse_iso_moment
from gravity_core.schema import BuildInfo
from gravity_core.storage.store import AnchorStore

__all__ = ["forget", "parse_before"]

logger = logging.getLogger(__name__)

#: The embedder a KB gets when the one it records cannot be loaded by name (the builder then
#: refuses the mismatch, naming the recorded one).
FALLBACK_EMBEDDER = "minilm"

_BEFORE_FORMS = "an ISO date (2024-05-03) or an ISO datetime with a zone (2024-05-03T18:00:00Z)"


def parse_before(value: str) -> date | datetime:
    """The moment ``--before`` names: an ISO date (midnight UTC) or an ISO datetime with a zone.

    Raises:
        ConfigurationError: anything else, or a datetime without a zone (the message names
            ``--before`` and the forms expected).
    """
    moment = parse_iso_moment(value)
    if moment is None:
        raise ConfigurationError(f"--before {value!r}: expected {_BEFORE_FORMS}")
    if isinstance(moment, datetime) and moment.tzinfo is None:
        raise ConfigurationError(f"--before {value!r} has no timezone: expected {_BEFORE_FORMS}")
    return moment


def _request(
    utterances: list[str], sessions: list[str], speakers: list[str], before: str | None
) -> ForgetRequest:
    if not (utterances or sessions or speakers or before is not None):
        raise ConfigurationError("name what to forget: --utterance, --session, --speaker or --before")
    return ForgetRequest(
        utterances=tuple(utterances),
        sessions=tuple(sessions),
        speakers=tuple(speakers),
        before=None if before is None else parse_before(before),
    )


def _check_extractor(built: BuildInfo, kind: ExtractorKind) -> None:
    """Refuse an offline forget of a KB an LLM built, telling the flags that rebuild it."""
    if kind is ExtractorKind.LLM or not built.extractor.startswith("llm:"):
        return
    model_name, _, mode = built.extractor.removeprefix("llm:").rpartition(":")
    flags = f"--extractor llm --model {model_name}" + (" --modules" if mode == "modules" else "")
    raise ConfigurationError(f"this KB was built with {built.extractor}: forget with {flags}")


def _embedder(spec: str | None, built: BuildInfo) -> Embedder:
    """``--embedder``, or by default the one the KB records (``minilm`` if that cannot be loaded)."""
    if spec is not None:
        return load_embedder(spec)
    if built.embedder:
        try:
            return embedder_from_name(built.embedder)
        except ConfigurationError:
            logger.info("cannot load embedder %r by name; trying %s", built.embedder, FALLBACK_EMBEDDER)
    return load_embedder(FALLBACK_EMBEDDER)


@contextmanager
def _progress_once_started(console: Console, label: str) -> Iterator[ProgressCallback]:
    """A progress callback whose bar appears at the rebuild's first report.

    A request the builder refuses (an unknown session, another extractor) thus prints its error
    line alone.
    """
    with ExitStack() as stack:
        update: ProgressCallback | None = None

        def progress(done: int, total: int) -> None:
            nonlocal update
            if update is None:
                update = stack.enter_context(_progress_bar(console))(label)
            update(done, total)

        yield progress


def _plan(kb_dir: Path, selected: dict[str, list[str]]) -> str:
    """What the forget removes, per thing named (printed before anything is removed)."""
    total = sum(len(ids) for ids in selected.values())
    parts = "; ".join(f"{why}: {len(ids)}" for why, ids in selected.items())
    return f"{kb_dir}: forgetting {total} utterance(s) ({parts})" if total else f"{kb_dir}: nothing to forget"


def _summary(kb_dir: Path, report: ForgetReport) -> str:
    if report.already_gone:
        named = ", ".join(f"{kind} {value!r}" for kind, value in report.already_gone)
        return (
            f"{kb_dir}: nothing to forget: the KB holds no {named}, and its last save was a forget "
            "(already forgotten); the KB is unchanged"
        )
    if report.generation is None:
        return f"{kb_dir}: nothing to forget ({report.remaining} utterances remain); the KB is unchanged"
    counts = ", ".join(
        f"{label} {report.before.get(kind, 0)} -> {report.after.get(kind, 0)}"
        for kind, label in (("entity", "entities"), ("event", "events"), ("topic", "topics"))
    )
    line = (
        f"{kb_dir}: forgot {report.forgotten} utterance(s) ({report.remaining} remain); {counts}; "
        f"generation {report.generation} (earlier generations deleted)"
    )
    if report.cache_entries_removed:
        line += f"; {report.cache_entries_removed} cached file(s) of the old build removed"
    for folder in report.caches_not_pruned:
        line += (
            f"; the cache {folder} is outside the KB folder and was left as it is "
            "(it may hold prompts of the forgotten turns)"
        )
    return line


def forget(
    kb_dir: Annotated[Path, typer.Argument(metavar="KB_DIR", help="KB folder written by 'gravity build'.")],
    utterance: Annotated[
        list[str] | None, typer.Option(metavar="ID", help="Utterance id to forget (repeatable).")
    ] = None,
    session: Annotated[
        list[str] | None, typer.Option(metavar="S", help="Session to forget (repeatable).")
    ] = None,
    speaker: Annotated[
        list[str] | None,
        typer.Option(
            metavar="NAME",
            help="Speaker whose utterances to forget: the name exactly as stored, or an alias the KB "
            "recorded (repeatable).",
        ),
    ] = None,
    before: Annotated[
        str | None,
        typer.Option(
            metavar="DATE",
            help="Forget what was said before this ISO date (midnight UTC) or ISO datetime with zone.",
        ),
    ] = None,
    extractor: Annotated[
        ExtractorKind,
        typer.Option(metavar="offline|llm", help="The extractor the KB was built with: offline or llm."),
    ] = ExtractorKind.OFFLINE,
    model: Annotated[
        str | None,
        typer.Option(metavar="PROVIDER:NAME", help="Chat model for --extractor llm (the KB's own)."),
    ] = None,
    fused: Annotated[
        bool, typer.Option("--fused/--modules", help="LLM: one call per batch, or one per module.")
    ] = True,
    embedder: Annotated[
        str | None,
        typer.Option(
            metavar="NAME", help="minilm or hashing[:DIM] (default: the one the KB was built with)."
        ),
    ] = None,
    dry_run: Annotated[
        bool, typer.Option("--dry-run", help="Print what would be forgotten, and change nothing.")
    ] = False,
    quiet: Annotated[bool, typer.Option("--quiet", "-q", help="No progress bar or summary.")] = False,
) -> None:
    """Forget utterances (by id, session, speaker or date) and all the KB knows only from them."""
    request = _request(utterance or [], session or [], speaker or [], before)
    store = AnchorStore(kb_dir)
    if not store.exists():
        raise ConfigurationError(f"{kb_dir}: KB_DIR holds no KB (build one with 'gravity build -o KB_DIR')")
    kb = store.load(vector_kinds=()).kb
    console = Console(stderr=True, quiet=quiet and not dry_run)
    if dry_run:
        console.print(_plan(kb_dir, request.selected(kb)) + " (dry run: nothing removed)", soft_wrap=True)
        return
    built = kb.build
    _check_extractor(built, extractor)
    chat = _chat_model(extractor, model, RetryPolicy(), DEFAULT_MAX_CONCURRENCY)
    anchor_embedder = _embedder(embedder, built)
    builder = AnchorBuilder(
        _extractor(chat, fused, store, anchor_embedder, DEFAULT_MAX_CONCURRENCY), anchor_embedder, store=store
    )
    with contextlib.suppress(NothingNamedHeld):  # the builder says so (or that it was already forgotten)
        console.print(_plan(kb_dir, request.selected(builder.kb)), soft_wrap=True)
    with _progress_once_started(console, "rebuilding") as progress:
        report = builder.forget(request, progress=progress)
    console.print(_summary(kb_dir, report), soft_wrap=True)
