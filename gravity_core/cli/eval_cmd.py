"""``gravity eval locomo PATH`` and ``gravity eval longmemeval PATH``: hosts with and without GRAVITY."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TaskID, TextColumn, TimeElapsedColumn

from gravity_core.context.policy import ContextPolicy
from gravity_core.embeddings.base import Embedder as EmbedderT
from gravity_core.errors import ConfigurationError
from gravity_core.eval.datasets import EvalSample, load_locomo_eval, load_longmemeval_eval
from gravity_core.eval.grading import Grader
from gravity_core.eval.hosts import Host
from gravity_core.eval.report import write_outputs
from gravity_core.eval.results import OVERALL, EvalResults
from gravity_core.eval.runner import HostFactory, run_eval, vector_host_factory
from gravity_core.eval.settings import (
    ABLATION_SETTINGS,
    DEFAULT_BUDGETS,
    HOST_ALONE,
    EvalConfig,
    parse_budgets,
)
from gravity_core.extract.base import Extractor
from gravity_core.llm.retry import ConcurrencyLimiter
from gravity_core.providers import load_chat_model, load_embedder
from gravity_core.schema import AnchorKind
from gravity_core.text.tokens import TokenCounter

__all__ = ["make_eval_app"]

_DEFAULTS = EvalConfig()
_SOURCE_KINDS = ",".join(kind.value for kind in _DEFAULTS.policy.source_kinds)
_BUDGETS = ",".join(map(str, DEFAULT_BUDGETS))
_LLM_SETTINGS = ",".join(_DEFAULTS.llm_settings)
_LLM_BUDGETS = ",".join(map(str, _DEFAULTS.llm_budgets))

Output = Annotated[
    Path | None,
    typer.Option("-o", "--output", metavar="DIR", help="Run folder (default: gravity-eval/<benchmark>)."),
]
Budgets = Annotated[
    str, typer.Option(metavar="N,N,...", help="Total context budgets, cl100k tokens, comma-separated.")
]
Settings = Annotated[
    str,
    typer.Option(
        metavar="NAMES", help="GRAVITY settings (presets), comma-separated; 'all' for every ablation."
    ),
]
Hosts = Annotated[
    list[str] | None,
    typer.Option("--host", metavar="vector|sgmem|bm25", help="Host memory (default: vector); repeatable."),
]
Limit = Annotated[
    int | None, typer.Option(min=1, metavar="N", help="Only the first N questions of each sample.")
]
Embedder = Annotated[str, typer.Option(metavar="NAME", help="minilm (offline default) or hashing[:DIM].")]
ExtractorOpt = Annotated[
    str, typer.Option(metavar="offline|llm", help="KB extractor (llm uses --extract-model).")
]
ExtractModel = Annotated[
    str | None, typer.Option(metavar="PROVIDER:NAME", help="Chat model of --extractor llm.")
]
Model = Annotated[
    str | None,
    typer.Option(metavar="PROVIDER:NAME", help="Chat model that answers (none: offline metrics only)."),
]
JudgeModel = Annotated[
    str | None, typer.Option(metavar="PROVIDER:NAME", help="Chat model that judges (default: --model).")
]
LLMSettings = Annotated[
    str,
    typer.Option(
        metavar="NAMES", help="Settings the model answers, comma-separated (the host alone always)."
    ),
]
LLMBudgets = Annotated[
    str, typer.Option(metavar="N,N,...", help="Budgets at which the model answers, comma-separated.")
]
AnchorShare = Annotated[
    float,
    typer.Option(
        metavar="X", help="GRAVITY's injection takes this share of each budget beyond --host-reserve."
    ),
]
HostReserve = Annotated[
    int, typer.Option(min=0, metavar="N", help="Tokens of every budget kept for the host's memories.")
]
MinAnchorTokens = Annotated[
    int, typer.Option(min=0, metavar="N", help="A smaller anchor share than this gives the anchors nothing.")
]
MaxAnchorTokens = Annotated[
    int,
    typer.Option(
        min=0,
        metavar="N",
        help="GRAVITY's injection takes at most this many tokens (0: no cap but the preset's).",
    ),
]
ExpansionLead = Annotated[
    int, typer.Option(min=0, metavar="N", help="The question's own hits that always come first.")
]
ExpansionEvery = Annotated[
    int,
    typer.Option(
        min=0,
        metavar="N",
        help="After the lead, every Nth place may hold an expansion's hit (0: none, the default;"
        " 1: the paper's query expansion).",
    ),
]
ExpansionDepth = Annotated[
    int, typer.Option(min=1, metavar="N", help="Hits of each expansion's search that may be added.")
]
SourceKinds = Annotated[
    str,
    typer.Option(
        metavar="KINDS",
        help="Anchors whose source turns are fetched from the host, in order, e.g. event,entity.",
    ),
]
SourcesPerAnchor = Annotated[
    int, typer.Option(min=0, metavar="N", help="Source turns fetched per anchor (0: no provenance).")
]
SourceLead = Annotated[
    int, typer.Option(min=0, metavar="N", help="The question's hits that come before any source turn.")
]
SourceEvery = Annotated[
    int,
    typer.Option(
        min=0, metavar="N", help="After --source-lead, every Nth place is a source turn's (0: none)."
    ),
]
SourceTurnShare = Annotated[
    float,
    typer.Option(
        min=0.0,
        max=1.0,
        metavar="SHARE",
        help="A fetched source turn longer than this share of the memories' tokens takes no source place.",
    ),
]
SourcesShare = Annotated[
    float,
    typer.Option(
        min=0.0,
        max=1.0,
        metavar="SHARE",
        help="The fetched source turns in source places take at most this share of the memories' tokens.",
    ),
]
Concurrency = Annotated[int, typer.Option(min=1, metavar="N", help="Chat-model requests in flight.")]
NoPlots = Annotated[bool, typer.Option("--no-plots", help="Skip the PNG plots (they need matplotlib).")]
Quiet = Annotated[bool, typer.Option("--quiet", "-q", help="No progress bar.")]


def _policy(
    share: float,
    reserve: int,
    anchor_tokens: tuple[int, int],
    expansions: tuple[int, int, int],
    sources: tuple[str, int, int, int],
    source_bounds: tuple[float, float],
) -> ContextPolicy:
    lead, every, depth = expansions
    least, most = anchor_tokens
    kinds, per_anchor, source_lead, source_every = sources
    try:
        source_kinds = tuple(AnchorKind(kind) for kind in _split(kinds))
    except ValueError:
        known = ", ".join(kind.value for kind in AnchorKind)
        raise ConfigurationError(f"--source-kinds takes {known}, comma-separated; got {kinds!r}") from None
    return ContextPolicy(
        lead=lead,
        every=every,
        depth=depth,
        anchor_share=share,
        host_reserve=reserve,
        min_anchor_tokens=least,
        max_anchor_tokens=most or None,
        source_kinds=source_kinds,
        sources_per_anchor=per_anchor,
        source_lead=source_lead,
        source_every=source_every,
        max_source_turn_share=source_bounds[0],
        max_sources_share=source_bounds[1],
    )


def _split(text: str) -> list[str]:
    return [part.strip() for part in text.split(",") if part.strip()]


def _settings(text: str) -> tuple[str, ...]:
    chosen = _split(text)
    if chosen == ["all"]:
        return ABLATION_SETTINGS
    return tuple(s for s in chosen if s != HOST_ALONE)


def _extractor(kind: str, model: str | None, output: Path, embedder: EmbedderT) -> Extractor:
    from gravity_core.extract.choice import make_extractor

    if kind == "offline":
        if model:
            raise ConfigurationError("--extract-model is for --extractor llm")
        return make_extractor(embedder)
    if kind == "llm":
        if not model:
            raise ConfigurationError("--extractor llm needs --extract-model provider:name")
        return make_extractor(embedder, chat_model=load_chat_model(model), cache_dir=output / "extract_cache")
    raise ConfigurationError(f"unknown extractor {kind!r} (use offline or llm)")


def _sgmem_factory(embedder: EmbedderT, counter: TokenCounter, output: Path) -> HostFactory:
    from gravity_core.eval.sgmem_host import SGMemHost, sgmem_available

    if not sgmem_available():
        raise ConfigurationError("the sgmem host is not available in this installation")

    def make(sample: EvalSample) -> Host:
        folder = output / "sgmem" / sample.id.replace("/", "_")
        return SGMemHost(sample.utterances, embedder, counter=counter, directory=folder)

    return make


def _host_factories(
    names: Sequence[str], embedder: EmbedderT, counter: TokenCounter, output: Path
) -> list[HostFactory]:
    factories: list[HostFactory] = []
    for name in dict.fromkeys(names or ["vector"]):
        if name == "vector":
            factories.append(vector_host_factory(embedder, counter=counter, cache_dir=output / "embeddings"))
        elif name == "sgmem":
            factories.append(_sgmem_factory(embedder, counter, output))
        elif name == "bm25":
            from gravity_core.eval.bm25_host import bm25_host_factory

            factories.append(bm25_host_factory(counter=counter))
        else:
            raise ConfigurationError(f"unknown host {name!r} (use vector, sgmem or bm25)")
    return factories


class _Bars:
    """Rich progress bars for the runner's stages."""

    def __init__(self, progress: Progress) -> None:
        self.progress = progress
        self.tasks: dict[str, TaskID] = {}

    def __call__(self, stage: str, done: int, total: int) -> None:
        if stage not in self.tasks:
            self.tasks[stage] = self.progress.add_task(stage, total=total)
        self.progress.update(self.tasks[stage], completed=done, total=total)


def _summary_lines(results: EvalResults) -> list[str]:
    lines: list[str] = []
    for host in results.info["hosts"]:
        for budget in results.config["budgets"]:
            cells = results.summary[host]
            parts = []
            for setting in (HOST_ALONE, "full"):
                cell = cells.get(setting, {}).get(str(budget))
                if cell is None:
                    continue
                overall = cell[OVERALL]
                label = host if setting == HOST_ALONE else f"{host}+GRAVITY"
                parts.append(
                    f"{label}: coverage {overall['answer_coverage']:.3f}, evidence recall "
                    + (f"{overall['evidence_recall']:.3f}" if overall["evidence_recall"] is not None else "-")
                    + (f", accuracy {overall['accuracy']:.3f}" if overall["accuracy"] is not None else "")
                )
            lines.append(f"{budget:>5} tokens  " + " | ".join(parts))
    for goal in results.goals:
        lines.append(f"goal ({goal.host}): {'met' if goal.met else 'not met'}")
    return lines


def _evaluate(
    benchmark: str,
    load: Callable[[], list[EvalSample]],
    *,
    output: Path | None,
    budgets: str,
    settings: str,
    hosts: list[str] | None,
    limit: int | None,
    embedder: str,
    extractor: str,
    extract_model: str | None,
    model: str | None,
    judge_model: str | None,
    llm_settings: str,
    llm_budgets: str,
    policy: ContextPolicy,
    concurrency: int,
    no_plots: bool,
    quiet: bool,
) -> None:
    folder = output or Path("gravity-eval") / benchmark
    config = EvalConfig(
        budgets=parse_budgets(budgets),
        settings=_settings(settings),
        policy=policy,
        llm_settings=tuple(_split(llm_settings)),
        llm_budgets=parse_budgets(llm_budgets),
        concurrency=concurrency,
    )
    if judge_model and not model:
        raise ConfigurationError("--judge-model needs --model (the answering model)")
    if model and not set(config.llm_budgets) & set(config.budgets):
        raise ConfigurationError(
            f"--llm-budgets {llm_budgets} names none of the budgets {budgets}: the model would answer nothing"
        )
    grader = None
    if model:  # first: a missing API key stops the run before anything is read
        # One limiter for both models: at most --concurrency requests in flight in all.
        limiter = ConcurrencyLimiter(concurrency)
        answerer = load_chat_model(model, limiter=limiter)
        judge = load_chat_model(judge_model, limiter=limiter) if judge_model else None
        grader = Grader(answerer, judge, cache_dir=folder / "llm_cache")
    samples = load()
    if limit is not None:
        samples = [dataclasses.replace(s, questions=s.questions[:limit]) for s in samples]
    counter = TokenCounter()
    shared_embedder = load_embedder(embedder)
    console = Console(stderr=True, quiet=quiet)
    columns = (TextColumn("{task.description:>9}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn())
    with Progress(*columns, console=console, transient=False) as progress:
        results = run_eval(
            samples,
            benchmark=benchmark,
            output_dir=folder,
            embedder=shared_embedder,
            extractor=_extractor(extractor, extract_model, folder, shared_embedder),
            hosts=_host_factories(hosts or [], shared_embedder, counter, folder),
            config=config,
            grader=grader,
            counter=counter,
            progress=_Bars(progress),
        )
    written = write_outputs(results, folder, plots=not no_plots)
    for line in _summary_lines(results):
        typer.echo(line)
    typer.echo(f"results: {written['json']}")
    typer.echo(f"report:  {written['report']}")
    plots = [str(p) for key, p in written.items() if key.startswith("plot:")]
    if plots:
        typer.echo(f"plots:   {', '.join(plots)}")


def locomo(
    path: Annotated[Path, typer.Argument(metavar="FILE", help="LoCoMo JSON file (e.g. locomo10.json).")],
    output: Output = None,
    samples: Annotated[
        str | None, typer.Option(metavar="IDS", help="Sample ids, comma-separated (default: all).")
    ] = None,
    budgets: Budgets = _BUDGETS,
    settings: Settings = "all",
    host: Hosts = None,
    limit: Limit = None,
    embedder: Embedder = "minilm",
    extractor: ExtractorOpt = "offline",
    extract_model: ExtractModel = None,
    model: Model = None,
    judge_model: JudgeModel = None,
    llm_settings: LLMSettings = _LLM_SETTINGS,
    llm_budgets: LLMBudgets = _LLM_BUDGETS,
    anchor_share: AnchorShare = _DEFAULTS.policy.anchor_share,
    host_reserve: HostReserve = _DEFAULTS.policy.host_reserve,
    min_anchor_tokens: MinAnchorTokens = _DEFAULTS.policy.min_anchor_tokens,
    max_anchor_tokens: MaxAnchorTokens = _DEFAULTS.policy.max_anchor_tokens or 0,
    expansion_lead: ExpansionLead = _DEFAULTS.policy.lead,
    expansion_every: ExpansionEvery = _DEFAULTS.policy.every,
    expansion_depth: ExpansionDepth = _DEFAULTS.policy.depth,
    source_kinds: SourceKinds = _SOURCE_KINDS,
    sources_per_anchor: SourcesPerAnchor = _DEFAULTS.policy.sources_per_anchor,
    source_lead: SourceLead = _DEFAULTS.policy.source_lead,
    source_every: SourceEvery = _DEFAULTS.policy.source_every,
    source_turn_share: SourceTurnShare = _DEFAULTS.policy.max_source_turn_share,
    sources_share: SourcesShare = _DEFAULTS.policy.max_sources_share,
    concurrency: Concurrency = _DEFAULTS.concurrency,
    no_plots: NoPlots = False,
    quiet: Quiet = False,
) -> None:
    """Evaluate on LoCoMo (categories 1-4): evidence recall, answer coverage; accuracy with --model."""
    chosen = _split(samples) if samples else None
    _evaluate(
        "locomo",
        lambda: load_locomo_eval(path, samples=chosen),
        output=output,
        budgets=budgets,
        settings=settings,
        hosts=host,
        limit=limit,
        embedder=embedder,
        extractor=extractor,
        extract_model=extract_model,
        model=model,
        judge_model=judge_model,
        llm_settings=llm_settings,
        llm_budgets=llm_budgets,
        policy=_policy(
            anchor_share,
            host_reserve,
            (min_anchor_tokens, max_anchor_tokens),
            (expansion_lead, expansion_every, expansion_depth),
            (source_kinds, sources_per_anchor, source_lead, source_every),
            (source_turn_share, sources_share),
        ),
        concurrency=concurrency,
        no_plots=no_plots,
        quiet=quiet,
    )


def longmemeval(
    path: Annotated[
        Path, typer.Argument(metavar="FILE", help="LongMemEval JSON file (e.g. longmemeval_s.json).")
    ],
    output: Output = None,
    questions: Annotated[
        str | None, typer.Option(metavar="IDS", help="Question ids, comma-separated (default: all).")
    ] = None,
    abstention: Annotated[bool, typer.Option(help="Include the abstention (_abs) questions.")] = False,
    budgets: Budgets = _BUDGETS,
    settings: Settings = "all",
    host: Hosts = None,
    embedder: Embedder = "minilm",
    extractor: ExtractorOpt = "offline",
    extract_model: ExtractModel = None,
    model: Model = None,
    judge_model: JudgeModel = None,
    llm_settings: LLMSettings = _LLM_SETTINGS,
    llm_budgets: LLMBudgets = _LLM_BUDGETS,
    anchor_share: AnchorShare = _DEFAULTS.policy.anchor_share,
    host_reserve: HostReserve = _DEFAULTS.policy.host_reserve,
    min_anchor_tokens: MinAnchorTokens = _DEFAULTS.policy.min_anchor_tokens,
    max_anchor_tokens: MaxAnchorTokens = _DEFAULTS.policy.max_anchor_tokens or 0,
    expansion_lead: ExpansionLead = _DEFAULTS.policy.lead,
    expansion_every: ExpansionEvery = _DEFAULTS.policy.every,
    expansion_depth: ExpansionDepth = _DEFAULTS.policy.depth,
    source_kinds: SourceKinds = _SOURCE_KINDS,
    sources_per_anchor: SourcesPerAnchor = _DEFAULTS.policy.sources_per_anchor,
    source_lead: SourceLead = _DEFAULTS.policy.source_lead,
    source_every: SourceEvery = _DEFAULTS.policy.source_every,
    source_turn_share: SourceTurnShare = _DEFAULTS.policy.max_source_turn_share,
    sources_share: SourcesShare = _DEFAULTS.policy.max_sources_share,
    concurrency: Concurrency = _DEFAULTS.concurrency,
    no_plots: NoPlots = False,
    quiet: Quiet = False,
) -> None:
    """Evaluate on LongMemEval (one haystack per question), per question type."""
    chosen = _split(questions) if questions else None
    _evaluate(
        "longmemeval",
        lambda: load_longmemeval_eval(path, question_ids=chosen, include_abstention=abstention),
        output=output,
        budgets=budgets,
        settings=settings,
        hosts=host,
        limit=None,
        embedder=embedder,
        extractor=extractor,
        extract_model=extract_model,
        model=model,
        judge_model=judge_model,
        llm_settings=llm_settings,
        llm_budgets=llm_budgets,
        policy=_policy(
            anchor_share,
            host_reserve,
            (min_anchor_tokens, max_anchor_tokens),
            (expansion_lead, expansion_every, expansion_depth),
            (source_kinds, sources_per_anchor, source_lead, source_every),
            (source_turn_share, sources_share),
        ),
        concurrency=concurrency,
        no_plots=no_plots,
        quiet=quiet,
    )


def make_eval_app() -> typer.Typer:
    """The ``gravity eval`` sub-application.

    Register it with ``app.add_typer(make_eval_app(), name="eval")``.
    """
    app = typer.Typer(
        help="Evaluate host memories with and without GRAVITY on LoCoMo or LongMemEval.",
        no_args_is_help=True,
        add_completion=False,
        pretty_exceptions_enable=False,
        rich_markup_mode=None,
    )
    app.command("locomo")(locomo)
    app.command("longmemeval")(longmemeval)
    return app
