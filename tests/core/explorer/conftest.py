"""Fixtures of the explorer tests: KBs (built from the sample conversation, and one made by hand
with hostile text), the page written by ``gravity show``, and a headless Chromium."""

from __future__ import annotations

import os
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, date, datetime
from pathlib import Path
from typing import Any

import pytest

from gravity_core.cli import main
from gravity_core.schema import (
    ArcSnapshot,
    Attribute,
    EntityAnchor,
    EntityType,
    EventAnchor,
    Fact,
    Granularity,
    KnowledgeBase,
    Relation,
    StateTransition,
    TimeRef,
    TopicAnchor,
    TrailLink,
    Utterance,
)
from gravity_core.storage.store import AnchorStore
from tests.core.explorer.browser import CHROMIUM_ARGS, CHROMIUM_INSTALL, chromium_executable

REPO = Path(__file__).resolve().parents[3]
SAMPLE = REPO / "examples" / "sample_conversation.jsonl"
LOCOMO = REPO.parent / "shared" / "data" / "locomo" / "locomo_dev.json"

HOSTILE = '</script><script>alert(1)</script><img src=x onerror="alert(2)"> & <!-- \u2028'


def run_cli(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    """Run ``gravity ARGV`` in process: exit code, stdout, stderr."""
    with pytest.raises(SystemExit) as exit_info:
        main(argv)
        raise SystemExit(0)
    out = capsys.readouterr()
    return int(exit_info.value.code or 0), out.out, out.err


@dataclass
class ShownKB:
    """A KB on disk and the explorer page ``gravity show`` wrote for it."""

    kb: KnowledgeBase
    kb_dir: Path
    html: Path


def _show(kb_dir: Path, html: Path) -> ShownKB:
    # The session-scoped fixtures cannot use capsys; `gravity show` only writes one line to stderr.
    with pytest.raises(SystemExit) as exit_info:
        main(["show", str(kb_dir), "-o", str(html)])
        raise SystemExit(0)
    assert not exit_info.value.code, f"gravity show failed with exit code {exit_info.value.code}"
    return ShownKB(kb=AnchorStore(kb_dir).load().kb, kb_dir=kb_dir, html=html)


def _build(source: Path, kb_dir: Path, *extra: str) -> None:
    with pytest.raises(SystemExit) as exit_info:
        main(["build", str(source), "-o", str(kb_dir), "--embedder", "hashing", "-q", *extra])
        raise SystemExit(0)
    assert not exit_info.value.code, f"gravity build failed with exit code {exit_info.value.code}"


@pytest.fixture(scope="session")
def sample_shown(tmp_path_factory: pytest.TempPathFactory) -> ShownKB:
    """The sample conversation built offline (hashing embedder), and its page."""
    folder = tmp_path_factory.mktemp("explorer-sample")
    _build(SAMPLE, folder / "kb")
    return _show(folder / "kb", folder / "anchors.html")


@pytest.fixture(scope="session")
def locomo_shown(tmp_path_factory: pytest.TempPathFactory) -> ShownKB:
    """LoCoMo conv-26 built offline (hashing embedder), and its page; skipped without the data."""
    if not LOCOMO.exists():
        pytest.skip(f"LoCoMo data not beside the repo ({LOCOMO})")
    folder = tmp_path_factory.mktemp("explorer-locomo")
    _build(LOCOMO, folder / "kb", "--sample", "conv-26")
    return _show(folder / "kb", folder / "anchors.html")


def hostile_kb() -> KnowledgeBase:
    """A small KB made by hand: every kind of anchor, a state change, a relation, and text that
    would break out of the page's script element if it were not escaped."""
    day1 = datetime(2024, 3, 1, 10, 0, tzinfo=UTC)
    day2 = datetime(2024, 4, 2, 18, 30, tzinfo=UTC)
    utterances = [
        Utterance(id="s1:1", speaker="Ana", text=f"My dog is called {HOSTILE}", session="s1", timestamp=day1),
        Utterance(id="s1:2", speaker="Ben", text="I live in Leeds.", session="s1", timestamp=day1),
        Utterance(
            id="s2:1", speaker="Ben", text="I moved to Bristol last week.", session="s2", timestamp=day2
        ),
    ]

    def attribute(name: str, value: str, source: str, when: datetime, *, current: bool = True) -> Attribute:
        return Attribute(
            name=name,
            value=value,
            confidence=0.8,
            exclusive=True,
            current=current,
            first_seen=when,
            last_seen=when,
            sources=[source],
        )

    ana = EntityAnchor(
        id="ana",
        name="Ana",
        type=EntityType.PERSON,
        is_speaker=True,
        attributes=[attribute("pet_name", HOSTILE, "s1:1", day1)],
        relations=[
            Relation(
                relation="friend_of",
                object="Ben",
                object_id="ben",
                confidence=0.7,
                first_seen=day1,
                last_seen=day1,
                sources=["s1:1"],
            )
        ],
        co_occurrence={"ben": 1, "dog": 1},
        mentions=1,
        first_seen=day1,
        last_seen=day1,
        sources=["s1:1"],
    )
    ben = EntityAnchor(
        id="ben",
        name="Ben",
        type=EntityType.PERSON,
        is_speaker=True,
        attributes=[
            attribute("city", "Leeds", "s1:2", day1, current=False),
            attribute("city", "Bristol", "s2:1", day2),
        ],
        transitions=[
            StateTransition(attribute="city", old="Leeds", new="Bristol", when=day2, sources=["s2:1"])
        ],
        co_occurrence={"ana": 1},
        mentions=2,
        first_seen=day1,
        last_seen=day2,
        sources=["s1:2", "s2:1"],
    )
    dog = EntityAnchor(
        id="dog",
        name=HOSTILE,
        aliases=["the dog"],
        type=EntityType.PET,
        mentions=1,
        first_seen=day1,
        last_seen=day1,
        sources=["s1:1"],
    )
    moved = EventAnchor(
        id="ev-1",
        who=["Ben"],
        who_ids=["ben"],
        what="moved to Bristol",
        when=TimeRef(
            raw="last week",
            start=date(2024, 3, 25),
            end=date(2024, 3, 31),
            granularity=Granularity.WEEK,
            reference=day2.date(),
        ),
        where="Bristol",
        said_at=day2,
        session="s2",
        topic_id="t1",
        trails=[TrailLink(trail="who:ben", next="ev-2"), TrailLink(trail="topic:t1")],
        sources=["s2:1"],
    )
    named = EventAnchor(
        id="ev-2",
        who=["Ana"],
        who_ids=["ana"],
        what=f"named the dog {HOSTILE}",
        when=TimeRef.mentioned_on(day1.date()),
        said_at=day1,
        session="s1",
        trails=[TrailLink(trail="who:ana")],
        sources=["s1:1"],
    )
    topic = TopicAnchor(
        id="t1",
        label=f"moving {HOSTILE}",
        keywords=["move", "Bristol"],
        participants=["Ben"],
        sessions=["s1", "s2"],
        arc=[
            ArcSnapshot(session="s1", date=day1, summary="Ben lives in Leeds.", sources=["s1:2"]),
            ArcSnapshot(session="s2", date=day2, summary="Ben moved to Bristol.", sources=["s2:1"]),
        ],
        key_facts=[Fact(text="Ben moved to Bristol.", sources=["s2:1"])],
        sources=["s1:2", "s2:1"],
    )
    return KnowledgeBase(
        utterances={u.id: u for u in utterances},
        entities={e.id: e for e in (ana, ben, dog)},
        events={e.id: e for e in (moved, named)},
        topics={topic.id: topic},
    )


# ---------- the browser ----------


def artifacts_dir() -> Path:
    """Where the browser tests save screenshots: $GRAVITY_ARTIFACTS, else tests/artifacts/explorer."""
    folder = Path(os.environ.get("GRAVITY_ARTIFACTS") or REPO / "tests" / "artifacts") / "explorer"
    folder.mkdir(parents=True, exist_ok=True)
    return folder


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    """A headless Chromium driven by Playwright (the system's Chromium; no browser download).

    Module-scoped on purpose: while Playwright's sync API is open, its event loop runs in the main
    thread, and pytest-asyncio tests collected after this module could not start their own.

    A missing Chromium or Playwright fails the test (CI installs both) unless GRAVITY_SKIP_BROWSER=1.
    """
    if os.environ.get("GRAVITY_SKIP_BROWSER") == "1":
        pytest.skip("GRAVITY_SKIP_BROWSER=1")
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        pytest.fail(
            "the browser tests need Playwright: pip install 'gravity-memory[test]'; "
            "GRAVITY_SKIP_BROWSER=1 skips them"
        )
    executable = chromium_executable()
    if executable is None:
        pytest.fail(
            f"the browser tests need Chromium: {CHROMIUM_INSTALL} (Debian), or set GRAVITY_CHROMIUM to a "
            "Chromium/Chrome binary; GRAVITY_SKIP_BROWSER=1 skips them"
        )
    with sync_playwright() as playwright:
        launched = playwright.chromium.launch(executable_path=executable, headless=True, args=CHROMIUM_ARGS)
        try:
            yield launched
        finally:
            launched.close()
