"""AnchorBuilder: incremental add, idempotent rebuild with zero model calls, failed batches, resume."""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from gravity_core.build import AnchorBuilder, plan_batches
from gravity_core.embeddings import HashingEmbedder
from gravity_core.errors import AnchorStoreError, ConfigurationError, InputDataError, ProviderError
from gravity_core.extract.base import SessionSpanning
from gravity_core.extract.llm import LLMExtractor
from gravity_core.extract.offline import OfflineExtractor
from gravity_core.llm.base import Message
from gravity_core.llm.cache import ResponseCache
from gravity_core.schema import KnowledgeBase, Utterance
from gravity_core.storage.store import AnchorStore
from gravity_core.testing import FakeChatModel

EMBEDDER = HashingEmbedder(dim=64)
START = datetime(2024, 1, 8, 18, 0, tzinfo=UTC)


def conversation(sessions: int = 3, turns: int = 4) -> list[Utterance]:
    out = []
    for s in range(1, sessions + 1):
        for t in range(1, turns + 1):
            speaker = "Maya" if t % 2 else "Jonas"
            out.append(
                Utterance(
                    id=f"S{s}:{t}",
                    speaker=speaker,
                    text=f"Session {s} turn {t}: I went running with Biscuit yesterday.",
                    session=f"session_{s}",
                    timestamp=START + timedelta(days=14 * s, minutes=t),
                )
            )
    return out


def fused_answer(messages: Sequence[Message]) -> str:
    """What a well-behaved model answers: one fact per speaker and one event, citing the batch."""
    prompt = messages[-1]["content"]
    ids = re.findall(r"^\[(S\d+:\d+)\]", prompt, flags=re.MULTILINE)
    first = ids[0]
    session = first.split(":")[0]
    return json.dumps(
        {
            "entities": [
                {
                    "name": "Maya",
                    "type": "person",
                    "is_speaker": True,
                    "sources": [first],
                    "attributes": [
                        {
                            "name": "location",
                            "value": f"city of {session}",
                            "exclusive": True,
                            "sources": [first],
                        }
                    ],
                    "relations": [
                        {"relation": "pet", "object": "Biscuit", "object_type": "pet", "sources": [first]}
                    ],
                },
            ],
            "events": [
                {
                    "who": ["Maya"],
                    "what": f"went running in {session}",
                    "when": "yesterday",
                    "sources": [first],
                }
            ],
            "topics": [
                {
                    "label": "running",
                    "keywords": ["running"],
                    "summary": f"running in {session}",
                    "facts": [],
                    "sources": ids,
                }
            ],
        }
    )


def builder(tmp_path: Path, model: FakeChatModel, **kwargs: object) -> AnchorBuilder:
    store = AnchorStore(tmp_path / "kb")
    extractor = LLMExtractor(model, fused=True, cache=ResponseCache(store.cache_dir))
    kwargs.setdefault("batch_size", 4)  # one batch per 4-turn session
    return AnchorBuilder(extractor, EMBEDDER, store=store, **kwargs)  # type: ignore[arg-type]


def anchors(kb: KnowledgeBase) -> dict[str, object]:
    data = kb.to_dict()
    return {k: data[k] for k in ("utterances", "entities", "events", "topics")}


def test_batches_never_cross_sessions() -> None:
    utts = conversation(sessions=2, turns=5)
    sizes = [(b[0].session, len(b)) for b in plan_batches(utts, 3)]
    assert sizes == [("session_1", 3), ("session_1", 2), ("session_2", 3), ("session_2", 2)]


def test_batches_that_may_span_sessions_are_filled() -> None:
    utts = conversation(sessions=3, turns=5)
    spanning = plan_batches(utts, 4, spans_sessions=True)
    assert [len(b) for b in spanning] == [4, 4, 4, 3]
    assert [sorted({u.session for u in b}) for b in spanning][1] == ["session_1", "session_2"]
    assert [u for b in spanning for u in b] == utts
    assert [len(b) for b in plan_batches(utts, 4)] == [4, 1, 4, 1, 4, 1]


def test_only_the_fused_llm_extractor_spans_sessions() -> None:
    fused = LLMExtractor(FakeChatModel(fused_answer), fused=True)
    modules = LLMExtractor(FakeChatModel([]))
    offline = OfflineExtractor(EMBEDDER)
    assert isinstance(fused, SessionSpanning) and fused.spans_sessions
    assert not modules.spans_sessions
    assert not (isinstance(offline, SessionSpanning) and offline.spans_sessions)
    report = AnchorBuilder(offline, EMBEDDER, batch_size=8).add(conversation(sessions=2))
    assert report.batches == 2  # the offline extractor keeps one batch per session


def test_two_short_sessions_make_one_fused_call(tmp_path: Path) -> None:
    model = FakeChatModel(fused_answer)
    b = builder(tmp_path, model, batch_size=8)
    report = b.add(conversation(sessions=2))
    assert (report.batches, len(model.calls)) == (1, 1)
    prompt = model.calls[0][-1]["content"]
    assert "--- session session_1 --- 22 January 2024\n[S1:1] Maya:" in prompt
    assert "--- session session_2 --- 5 February 2024\n[S2:1] Maya:" in prompt
    # The topic cited both sessions: one snapshot each, as from two batches.
    [topic] = b.kb.topics.values()
    assert topic.sessions == ["session_1", "session_2"]
    assert [s.sources for s in topic.arc] == [
        ["S1:1", "S1:2", "S1:3", "S1:4"],
        ["S2:1", "S2:2", "S2:3", "S2:4"],
    ]
    assert set(b.kb.utterances) == {u.id for u in conversation(sessions=2)}


def test_a_failed_batch_across_sessions_is_retried_whole(tmp_path: Path) -> None:
    failing = {"on": True}

    def answer(messages: Sequence[Message]) -> str:
        if failing["on"] and "[S2:1]" in messages[1]["content"]:
            return "I cannot do that"
        return fused_answer(messages)

    b = builder(tmp_path, FakeChatModel(answer), batch_size=6)
    report = b.add(conversation())
    assert (report.batches, report.failed_batches) == (2, 1)
    [failed] = b.kb.build.failed_batches
    assert failed.utterance_ids == ["S1:1", "S1:2", "S1:3", "S1:4", "S2:1", "S2:2"]
    failing["on"] = False
    model = FakeChatModel(answer)
    retried = builder(tmp_path, model, batch_size=6).retry_failed()
    assert (retried.batches, retried.recovered_batches, len(model.calls)) == (1, 1, 1)
    assert AnchorStore(tmp_path / "kb").load().kb.build.failed_batches == []


def test_build_merges_all_batches_and_records_state_change(tmp_path: Path) -> None:
    model = FakeChatModel(fused_answer)
    b = builder(tmp_path, model)
    report = b.add(conversation())
    assert (report.added, report.batches, len(model.calls)) == (12, 3, 3)
    maya = b.kb.entities["maya"]
    assert [t.new for t in maya.transitions] == ["city of S2", "city of S3"]
    assert b.kb.entities["biscuit"].type.value == "pet"
    assert len(b.kb.events) == 3 and all(e.when and e.when.resolved for e in b.kb.events.values())
    [topic] = b.kb.topics.values()
    assert topic.sessions == ["session_1", "session_2", "session_3"]
    loaded = AnchorStore(tmp_path / "kb").load()
    assert anchors(loaded.kb) == anchors(b.kb)
    assert loaded.vectors.get(next(iter(loaded.vectors.kinds))).matrix.shape[1] == 64


def test_same_input_again_adds_nothing_and_calls_no_model(tmp_path: Path) -> None:
    builder(tmp_path, FakeChatModel(fused_answer)).add(conversation())
    generation = AnchorStore(tmp_path / "kb").load().generation
    silent = FakeChatModel([])
    report = builder(tmp_path, silent).add(conversation())
    assert (report.added, report.skipped, silent.calls) == (0, 12, [])
    assert AnchorStore(tmp_path / "kb").load().generation == generation


def test_rebuild_from_scratch_replays_cache_with_zero_calls(tmp_path: Path) -> None:
    first = builder(tmp_path, FakeChatModel(fused_answer))
    first.add(conversation())
    for part in (tmp_path / "kb").glob("g*"):
        for f in part.iterdir():
            f.unlink()
        part.rmdir()
    (tmp_path / "kb" / "manifest.json").unlink()
    silent = FakeChatModel([])
    again = builder(tmp_path, silent)
    again.add(conversation())
    assert silent.calls == []
    assert anchors(again.kb) == anchors(first.kb)


def test_new_session_is_added_incrementally(tmp_path: Path) -> None:
    utts = conversation(sessions=3)
    builder(tmp_path, FakeChatModel(fused_answer)).add(utts[:8])
    model = FakeChatModel(fused_answer)
    b = builder(tmp_path, model)
    report = b.add(utts)
    assert (report.added, report.skipped, len(model.calls)) == (4, 8, 1)
    assert b.kb.topics["tp-0001"].sessions == ["session_1", "session_2", "session_3"]


def test_invalid_model_output_records_failed_batch_and_build_goes_on(tmp_path: Path) -> None:
    def answer(messages: Sequence[Message]) -> str:
        return "I cannot do that" if "[S2:1]" in messages[1]["content"] else fused_answer(messages)

    b = builder(tmp_path, FakeChatModel(answer))
    report = b.add(conversation())
    assert report.failed_batches == 1
    [failed] = b.kb.build.failed_batches
    assert failed.utterance_ids == ["S2:1", "S2:2", "S2:3", "S2:4"]
    assert failed.raw_output is not None and "cannot" in failed.raw_output
    assert {e.session for e in b.kb.events.values()} == {"session_1", "session_3"}


def test_interrupted_build_resumes_to_the_same_kb(tmp_path: Path) -> None:
    reference = builder(tmp_path / "ref", FakeChatModel(fused_answer))
    reference.add(conversation())

    def dies_on_third(messages: Sequence[Message]) -> str:
        if "[S3:1]" in messages[1]["content"]:
            raise ProviderError("connection reset", provider="fake")
        return fused_answer(messages)

    with pytest.raises(ProviderError):
        builder(tmp_path, FakeChatModel(dies_on_third), checkpoint_every=1).add(conversation())
    assert len(AnchorStore(tmp_path / "kb").load().kb.utterances) == 8
    model = FakeChatModel(fused_answer)
    resumed = builder(tmp_path, model)
    resumed.add(conversation())
    assert len(model.calls) == 1
    assert anchors(resumed.kb) == anchors(reference.kb)


def test_changed_text_under_a_known_id_is_refused(tmp_path: Path) -> None:
    utts = conversation(sessions=1)
    builder(tmp_path, FakeChatModel(fused_answer)).add(utts)
    changed = [utts[0].model_copy(update={"text": "something else"})]
    with pytest.raises(InputDataError, match="S1:1"):
        builder(tmp_path, FakeChatModel([])).add(changed)
    assert AnchorStore(tmp_path / "kb").load().kb.utterances["S1:1"].text == utts[0].text


def test_other_embedder_on_existing_kb_is_refused(tmp_path: Path) -> None:
    builder(tmp_path, FakeChatModel(fused_answer)).add(conversation(sessions=1))
    store = AnchorStore(tmp_path / "kb")
    with pytest.raises(ConfigurationError, match="hashing-64"):
        AnchorBuilder(LLMExtractor(FakeChatModel([]), fused=True), HashingEmbedder(dim=32), store=store)


def test_bad_settings_are_refused() -> None:
    with pytest.raises(ConfigurationError, match="batch_size"):
        AnchorBuilder(LLMExtractor(FakeChatModel([]), fused=True), EMBEDDER, batch_size=0)


def test_two_builders_of_one_kb_take_turns_and_never_lose_each_others_work(tmp_path: Path) -> None:
    from gravity_core.extract.offline import OfflineExtractor

    utterances = conversation(sessions=3)
    first_two = [u for u in utterances if u.session != "session_3"]
    store = AnchorStore(tmp_path)
    early = AnchorBuilder(OfflineExtractor(EMBEDDER), EMBEDDER, store=AnchorStore(tmp_path))
    late = AnchorBuilder(OfflineExtractor(EMBEDDER), EMBEDDER, store=AnchorStore(tmp_path))
    early.add(first_two[:4])
    late.add(utterances)  # it read an empty folder; it must start from what `early` saved
    early.add(first_two)  # and `early` from what `late` saved: nothing is new

    kb = store.load().kb
    assert set(kb.utterances) == {u.id for u in utterances}
    assert early.kb.to_dict() == kb.to_dict()

    with store.writer(), pytest.raises(AnchorStoreError, match="another build is writing"):
        late.add(utterances)
