"""A long utterance costs the offline extractor time linear in its length (issue #39, item 9).

Nothing here is timed. The work is counted with a profiler on the real pipeline and extractor code:
how often a parse's entities and noun chunks are read (once each, however long the turn), and how
many calls extraction makes at n and 2n characters (twice as many, not four times). Before, every
mention read ``doc.ents`` (and every object pronoun and noun phrase ``doc.noun_chunks``) again, and
spaCy builds a new tuple of spans on each read: 100,000 characters took 43 s, 200,000 took 186 s.
A text longer than ``nlp.max_length`` is parsed in pieces and joined into one doc of the whole text.
"""

from __future__ import annotations

import cProfile
import pstats
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from gravity_core.extract.offline.entities import entity_names, extract_entities
from gravity_core.extract.offline.events import extract_events
from gravity_core.extract.offline.parse_cache import ParseCache
from gravity_core.extract.offline.parsing import ParsedTurn, noun_phrases, parse_batch
from gravity_core.schema import EntityType, KnowledgeBase, Utterance

STAMP = datetime(2024, 3, 9, 18, 0, tzinfo=UTC)

# Every lookup the extractors make per mention: names and relations ("his sister Lena"), a
# "she" subject, object pronouns ("printed it"), liked noun phrases, dated events, a question.
_PASSAGE = (
    "Last Friday I met Lena Novak at the Harbourside Hospital, and she told me about her brother Tomas. "
    "His sister Marta moved to Lyon in October. I finished my screenplay on Monday and printed it "
    "yesterday. My friend Jean loves live music, and he took up pottery last month. "
    "We adopted a beagle called Biscuit two weeks ago. Did Carol Hughes join the Eastville Runners? "
    "Her name is Coco. I love reading Charlotte's Web with my daughter Aisha. "
)


def _text(chars: int) -> str:
    return (_PASSAGE * (chars // len(_PASSAGE) + 1))[:chars].rsplit(" ", 1)[0]


def _turns(nlp: Any, text: str) -> list[ParsedTurn]:
    batch = [
        Utterance(id="s1:1", speaker="Maya", text=text, session="s1", timestamp=STAMP),
        Utterance(id="s1:2", speaker="Jonas", text="That sounds like a lot!", session="s1", timestamp=STAMP),
    ]
    return parse_batch(nlp, batch)


def _extract(turns: list[ParsedTurn]) -> None:
    kb = KnowledgeBase()
    entities = extract_entities(turns, kb)
    extract_events(turns, kb, entity_names(entities, EntityType.PERSON, EntityType.PET))
    for turn in turns:
        noun_phrases(turn)


def _profiled(run: Callable[[], object]) -> pstats.Stats:
    profile = cProfile.Profile()
    profile.enable()
    try:
        run()
    finally:
        profile.disable()
    return pstats.Stats(profile)


def _read_ents(doc: Any) -> object:
    return doc.ents


def _read_noun_chunks(doc: Any) -> object:
    return tuple(doc.noun_chunks)  # a generator: the profiler counts each step


def _getter(nlp: Any, read: Callable[[Any], object]) -> tuple[str, int, str]:
    """The profiler's key of the ``Doc`` property ``read`` reads (spaCy's Cython code reports its calls)."""
    doc = nlp("Lena met Tomas in Lyon last week.")
    stats = _profiled(lambda: read(doc)).stats  # type: ignore[attr-defined]
    keys = [key for key, row in stats.items() if any(caller[2] == read.__name__ for caller in row[4])]
    if len(keys) != 1:
        pytest.skip(f"the profiler does not see the Doc property {read.__name__} reads: {keys}")
    return keys[0]


def _calls(stats: pstats.Stats, key: tuple[str, int, str]) -> int:
    row = stats.stats.get(key)  # type: ignore[attr-defined]
    return int(row[1]) if row is not None else 0


def test_each_parse_has_its_entities_and_noun_chunks_read_once(nlp: Any) -> None:
    turns = _turns(nlp, _text(12_000))
    ents, chunks = _getter(nlp, _read_ents), _getter(nlp, _read_noun_chunks)
    assert len(turns[0].doc.ents) > 100  # many mentions, each looked up
    stats = _profiled(lambda: _extract(turns))
    assert _calls(stats, ents) <= len(turns)
    # One step per chunk and one to end, for each whole read.
    assert _calls(stats, chunks) <= sum(len(list(t.doc.noun_chunks)) + 1 for t in turns)


def test_extraction_work_grows_linearly_with_the_length_of_an_utterance(nlp: Any) -> None:
    calls = {}
    for chars in (6_000, 12_000):
        turns = _turns(nlp, _text(chars))
        calls[chars] = _profiled(lambda: _extract(turns)).total_calls  # type: ignore[attr-defined]  # noqa: B023
    # Linear: about 2x the calls for 2x the text (quadratic was 3x here, and more the longer the text).
    assert calls[12_000] / calls[6_000] < 2.3, calls


def test_a_text_over_the_pipelines_max_length_is_parsed_in_pieces_into_one_doc(
    nlp: Any, tmp_path: Path
) -> None:
    text = _text(6_000)
    whole = _turns(nlp, text)
    limit = nlp.max_length
    nlp.max_length = 2_500
    try:
        cache = ParseCache(tmp_path / "parses")
        pieces = _turns(nlp, text)
        cached = parse_batch(nlp, [t.utterance for t in pieces], cache, "p")
        again = parse_batch(nlp, [t.utterance for t in pieces], cache, "p")
    finally:
        nlp.max_length = limit
    doc = pieces[0].doc
    assert doc.text == text and len(doc) == len(whole[0].doc)
    assert [t.text for t in doc] == [t.text for t in whole[0].doc]
    assert again[0].doc.text == cached[0].doc.text == text
    assert [e.text for e in again[0].doc.ents] == [e.text for e in cached[0].doc.ents]
    # The pieces end at sentence ends, so the parse reads the same names as the whole text's.
    names = {e.name for e in extract_entities(pieces, KnowledgeBase())}
    assert {"Lena Novak", "Tomas", "Biscuit", "Lyon"} <= names
    assert names == {e.name for e in extract_entities(whole, KnowledgeBase())}


def test_the_long_utterance_benchmark_reports_seconds_and_the_ratio(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from benchmarks import long_utterance
    from benchmarks.common import BenchSettings
    from benchmarks.workspace import Workspace

    monkeypatch.setattr(long_utterance, "SIZES", (1_500, 6_000))  # 100 KB and 1 MB in `make bench`
    settings = BenchSettings.tiny(Path(__file__).parents[2] / "fixtures" / "locomo_tiny.json", "demo-1")
    result = long_utterance.run(settings, Workspace(settings, tmp_path))
    assert [r["name"] for r in result.ratios] == [
        "seconds, one 1,500-character utterance",
        "seconds, one 6,000-character utterance",
        "time per character, 6,000 / 1,500 characters",
    ]
    assert result.ratios[-1]["target"] == long_utterance.TARGET
    assert [len(result.figures["by_size"][size]["seconds"]) for size in ("1500", "6000")] == [3, 1]
    assert len(long_utterance.long_text(settings, 6_000)) == 6_000
