"""Forgetting by provenance: forget(X) on a KB built from I is the KB built from I without X, and
nothing of X stays on disk (generations, journal, response cache, Chroma rows)."""

from __future__ import annotations

import json
import re
import shutil
from collections.abc import Sequence
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st

from gravity_core.build import AnchorBuilder
from gravity_core.build.forget import ForgetRequest
from gravity_core.embeddings import HashingEmbedder
from gravity_core.errors import AnchorStoreError, ConfigurationError, ProviderError
from gravity_core.eval.datasets import load_locomo_eval
from gravity_core.extract.llm import LLMExtractor
from gravity_core.extract.offline import OfflineExtractor
from gravity_core.llm.base import Message
from gravity_core.llm.cache import ResponseCache
from gravity_core.loaders import load_conversation
from gravity_core.schema import KnowledgeBase, Utterance
from gravity_core.storage.anchor_vectors import AnchorVectors
from gravity_core.storage.generation_dirs import generation_folder
from gravity_core.storage.store import AnchorStore
from gravity_core.testing import FakeChatModel

ROOT = Path(__file__).resolve().parents[3]
SAMPLE = ROOT / "examples" / "sample_conversation.jsonl"
LOCOMO = ROOT.parents[0] / "shared" / "data" / "locomo" / "locomo_dev.json"
EMBEDDER = HashingEmbedder(dim=64)


def kb_data(kb: KnowledgeBase) -> dict[str, Any]:
    return kb.to_dict()


def assert_same_vectors(got: AnchorVectors, want: AnchorVectors) -> None:
    assert (got.embedder, got.dim) == (want.embedder, want.dim)
    for kind in sorted(set(got.kinds) | set(want.kinds)):
        a, b = got.get(kind), want.get(kind)
        assert (a.ids, a.digests) == (b.ids, b.digests), kind
        np.testing.assert_allclose(a.matrix, b.matrix, atol=1e-6, err_msg=kind)


def offline_builder(nlp: Any, store: AnchorStore | None = None) -> AnchorBuilder:
    """With a store, parses and answers are kept in its cache/ (as ``gravity build`` keeps them): a
    forget then reads the unchanged batches' parses and replays the answers to the batches before
    the first one it changed, and must still equal a build that extracted everything."""
    extractor = (
        OfflineExtractor.kept_in(store.cache_dir, EMBEDDER, pipeline=nlp)
        if store is not None
        else OfflineExtractor(EMBEDDER, pipeline=nlp)
    )
    return AnchorBuilder(extractor, EMBEDDER, store=store)


def requests(utterances: Sequence[Utterance]) -> st.SearchStrategy[ForgetRequest]:
    """Random subsets: some utterances, a whole session, one speaker, or everything before a day."""
    ids = [u.id for u in utterances]
    sessions = sorted({u.session for u in utterances})
    speakers = sorted({u.speaker for u in utterances})
    days = sorted({u.timestamp for u in utterances})
    return st.one_of(
        st.lists(st.sampled_from(ids), min_size=1, max_size=12, unique=True).map(
            lambda chosen: ForgetRequest(utterances=tuple(chosen))
        ),
        st.sampled_from(sessions).map(lambda s: ForgetRequest(sessions=(s,))),
        st.sampled_from(speakers).map(lambda s: ForgetRequest(speakers=(s,))),
        st.sampled_from(days[1:]).map(lambda d: ForgetRequest(before=d)),
    )


def check_forget_is_build_without(
    nlp: Any, utterances: list[Utterance], built: Path, request: ForgetRequest, tmp: Path
) -> None:
    folder = tmp / "kb"
    shutil.rmtree(folder, ignore_errors=True)
    shutil.copytree(built, folder)
    builder = offline_builder(nlp, AnchorStore(folder))
    gone = set(request.select(builder.kb))
    report = builder.forget(request)

    reference = offline_builder(nlp)
    reference.add([u for u in utterances if u.id not in gone])
    assert (report.forgotten, report.remaining) == (len(gone), len(utterances) - len(gone))
    assert kb_data(builder.kb) == kb_data(reference.kb)
    assert_same_vectors(builder.vectors, reference.vectors)
    stored = AnchorStore(folder).load()
    assert kb_data(stored.kb) == kb_data(reference.kb)
    assert_same_vectors(stored.vectors, reference.vectors)
    assert AnchorStore(folder).generations() == [report.generation]


# -- the invariant ------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def sample() -> list[Utterance]:
    return load_conversation(SAMPLE)


@pytest.fixture(scope="module")
def sample_kb(nlp: Any, sample: list[Utterance], tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("sample") / "kb"
    builder = offline_builder(nlp, AnchorStore(folder))
    for session in dict.fromkeys(u.session for u in sample):  # session by session, as a chat app does
        builder.add([u for u in sample if u.session == session])
    return folder


@settings(
    max_examples=8,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(data=st.data())
def test_forget_on_the_sample_conversation_is_the_build_without_it(
    nlp: Any, sample: list[Utterance], sample_kb: Path, tmp_path: Path, data: st.DataObject
) -> None:
    request = data.draw(requests(sample))
    check_forget_is_build_without(nlp, sample, sample_kb, request, tmp_path)


@pytest.fixture(scope="module")
def locomo() -> list[Utterance]:
    samples = load_locomo_eval(LOCOMO)
    return min(samples, key=lambda s: len(s.utterances)).utterances


@pytest.fixture(scope="module")
def locomo_kb(nlp: Any, locomo: list[Utterance], tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("locomo") / "kb"
    offline_builder(nlp, AnchorStore(folder)).add(locomo)
    return folder


@settings(
    max_examples=3,
    deadline=None,
    phases=[Phase.generate],
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(data=st.data())
def test_forget_on_a_locomo_conversation_is_the_build_without_it(
    nlp: Any, locomo: list[Utterance], locomo_kb: Path, tmp_path: Path, data: st.DataObject
) -> None:
    request = data.draw(requests(locomo))
    check_forget_is_build_without(nlp, locomo, locomo_kb, request, tmp_path)


def sessions_extracted(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The session of each batch the offline extractor really extracts (not replayed from its cache)."""
    seen: list[str] = []
    extract = OfflineExtractor._extract

    def recording(self: OfflineExtractor, batch: Sequence[Utterance], kb: KnowledgeBase) -> Any:
        seen.append(batch[0].session)
        return extract(self, batch, kb)

    monkeypatch.setattr(OfflineExtractor, "_extract", recording)
    return seen


def test_a_forget_extracts_again_only_from_the_first_batch_it_changed(
    nlp: Any, sample: list[Utterance], sample_kb: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    sessions = list(dict.fromkeys(u.session for u in sample))
    assert len(sessions) >= 3
    for forgotten in (sessions[-1], sessions[1]):
        extracted = sessions_extracted(monkeypatch)
        check_forget_is_build_without(
            nlp, sample, sample_kb, ForgetRequest(sessions=(forgotten,)), tmp_path / forgotten
        )
        later = sessions[sessions.index(forgotten) + 1 :]
        # The reference (no cache) extracts every remaining session; the forget only the later ones.
        remaining = [s for s in sessions if s != forgotten]
        assert sorted(extracted) == sorted(remaining + later)


def test_answers_on_a_kb_of_unknown_lineage_are_neither_kept_nor_replayed(
    nlp: Any, sample: list[Utterance], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A KB saved before lineages were kept: what state a batch met cannot be told, so its answer
    is not kept; a forget rebuilds from empty, which has a lineage again."""
    sessions = list(dict.fromkeys(u.session for u in sample))
    store = AnchorStore(tmp_path / "old")
    offline_builder(nlp, store).add([u for u in sample if u.session != sessions[-1]])
    loaded = store.load()
    loaded.kb.build.lineage = ""
    store.save(loaded.kb, loaded.vectors)
    updates = store.cache_dir / "updates"
    kept = sorted(updates.rglob("*.json"))
    extracted = sessions_extracted(monkeypatch)
    builder = offline_builder(nlp, AnchorStore(tmp_path / "old"))
    builder.add([u for u in sample if u.session == sessions[-1]])
    assert extracted == [sessions[-1]]
    assert builder.kb.build.lineage == ""
    assert sorted(updates.rglob("*.json")) == kept
    builder.forget(ForgetRequest(sessions=(sessions[-1],)))
    assert builder.kb.build.lineage
    assert extracted == [sessions[-1]]  # the rest replayed: answers of a build from empty


# -- nothing of it left on disk ----------------------------------------------------------------


START = datetime(2024, 1, 8, 18, 0, tzinfo=UTC)


def chat(sessions: int = 3, turns: int = 4) -> list[Utterance]:
    return [
        Utterance(
            id=f"S{s}:{t}",
            speaker="Maya" if t % 2 else "Jonas",
            text=f"Session {s} turn {t}: I went running with Biscuit{s}x{t} yesterday.",
            session=f"session_{s}",
            timestamp=START + timedelta(days=14 * s, minutes=t),
        )
        for s in range(1, sessions + 1)
        for t in range(1, turns + 1)
    ]


def fused_answer(messages: Sequence[Message]) -> str:
    """A model that reports, per batch, Maya's dog and one event quoting each turn's own dog name."""
    prompt = messages[-1]["content"]
    turns = re.findall(r"^\[(S\d+:\d+)\][^\n]*?(Biscuit\d+x\d+)", prompt, flags=re.MULTILINE)
    ids = [i for i, _ in turns]
    return json.dumps(
        {
            "entities": [
                {
                    "name": "Maya",
                    "type": "person",
                    "is_speaker": True,
                    "sources": ids,
                    "relations": [
                        {"relation": "dog", "object": dog, "object_type": "pet", "sources": [i]}
                        for i, dog in turns
                    ],
                }
            ],
            "events": [
                {"who": ["Maya"], "what": f"went running with {dog}", "when": "yesterday", "sources": [i]}
                for i, dog in turns
            ],
            "topics": [
                {
                    "label": "running",
                    "keywords": ["running"],
                    "summary": "running",
                    "facts": [],
                    "sources": ids,
                }
            ],
        }
    )


def llm_builder(folder: Path, model: FakeChatModel, batch_size: int = 4) -> AnchorBuilder:
    store = AnchorStore(folder)
    extractor = LLMExtractor(model, fused=True, cache=ResponseCache(store.cache_dir))
    return AnchorBuilder(extractor, EMBEDDER, batch_size=batch_size, store=store)


def files_holding(folder: Path, needle: str) -> list[Path]:
    data = needle.encode("utf-8")
    return [p for p in folder.rglob("*") if p.is_file() and data in p.read_bytes()]


def test_llm_kb_forget_is_the_build_without_and_leaves_no_byte_of_it(tmp_path: Path) -> None:
    utterances = chat()
    builder = llm_builder(tmp_path / "kb", FakeChatModel(fused_answer))
    for session in ("session_1", "session_2", "session_3"):
        builder.add([u for u in utterances if u.session == session])
    assert files_holding(tmp_path / "kb", "Biscuit2x3")  # in utterances, relations, events, cache

    model = FakeChatModel(fused_answer)
    forgetting = llm_builder(tmp_path / "kb", model)
    report = forgetting.forget(ForgetRequest(sessions=("session_2",)))

    reference = llm_builder(tmp_path / "ref", FakeChatModel(fused_answer))
    reference.add([u for u in utterances if u.session != "session_2"])
    assert kb_data(AnchorStore(tmp_path / "kb").load().kb) == kb_data(reference.kb)
    assert_same_vectors(AnchorStore(tmp_path / "kb").load().vectors, reference.vectors)
    assert (report.forgotten, report.remaining, report.before["event"], report.after["event"]) == (
        4,
        8,
        12,
        8,
    )
    # Session 1's prompt is unchanged (answered from the cache); session 3's listed the entities
    # known from session 2, so the model is asked again without them.
    assert len(model.calls) == 1
    assert "Session 3 turn 1" in model.calls[0][-1]["content"]
    for turn in ("1", "2", "3", "4"):
        assert files_holding(tmp_path / "kb", f"Biscuit2x{turn}") == []
        assert files_holding(tmp_path / "kb", f"Session 2 turn {turn}") == []
    # The cache keeps the two answers the rebuild used and nothing else.
    assert report.cache_entries_removed == 2
    assert len(list((tmp_path / "kb" / "cache").glob("*/*.json"))) == 2
    assert files_holding(tmp_path / "kb", "Biscuit1x1")  # what remains is still there


def test_a_forget_of_batches_across_sessions_is_the_build_without_it(tmp_path: Path) -> None:
    utterances = chat()
    builder = llm_builder(tmp_path / "kb", FakeChatModel(fused_answer), batch_size=6)
    built = builder.add(utterances)
    assert built.batches == 2  # S1:1..S2:2 and S2:3..S3:4: each holds a part of session 2

    model = FakeChatModel(fused_answer)
    report = llm_builder(tmp_path / "kb", model, batch_size=6).forget(ForgetRequest(sessions=("session_2",)))

    reference = llm_builder(tmp_path / "ref", FakeChatModel(fused_answer), batch_size=6)
    reference.add([u for u in utterances if u.session != "session_2"])
    assert kb_data(AnchorStore(tmp_path / "kb").load().kb) == kb_data(reference.kb)
    assert_same_vectors(AnchorStore(tmp_path / "kb").load().vectors, reference.vectors)
    # The rebuild's batches, S1:1..S3:2 and S3:3..S3:4, were never asked before.
    assert [re.findall(r"^\[(S\d+:\d+)\]", c[-1]["content"], flags=re.MULTILINE)[0] for c in model.calls] == [
        "S1:1",
        "S3:3",
    ]
    assert (report.forgotten, report.remaining, report.cache_entries_removed) == (4, 8, 2)
    for turn in ("1", "2", "3", "4"):
        assert files_holding(tmp_path / "kb", f"Biscuit2x{turn}") == []


def test_forgotten_turn_vectors_and_anchor_rows_are_gone(
    nlp: Any, sample: list[Utterance], tmp_path: Path
) -> None:
    builder = offline_builder(nlp, AnchorStore(tmp_path / "kb"))
    builder.add(sample)
    session = sample[-1].session
    forgotten = [u for u in sample if u.session == session]
    old_turns = builder.vectors.get("turn")
    gone_rows = [old_turns.matrix[old_turns.ids.index(u.id)] for u in forgotten]
    builder.forget(ForgetRequest(sessions=(session,)))
    for path in (tmp_path / "kb").rglob("vectors-*.npy"):
        matrix = np.load(path)
        for row in gone_rows:
            assert not np.any(np.all(np.isclose(matrix, row), axis=1)), path.name
    assert list((tmp_path / "kb" / "cache" / "parses").rglob("*.json"))  # the kept parses
    for utterance in forgotten:
        if not any(utterance.text in u.text for u in sample if u.session != session):
            assert files_holding(tmp_path / "kb", utterance.text) == [], utterance.id


def test_chroma_sync_after_a_forget_drops_the_rows_of_anchors_that_are_gone(
    nlp: Any, sample: list[Utterance], tmp_path: Path
) -> None:
    pytest.importorskip("chromadb")
    from gravity_core.query.index import ChromaAnchorIndex
    from gravity_core.schema import AnchorKind

    builder = offline_builder(nlp, AnchorStore(tmp_path / "kb"))
    builder.add(sample)
    index = ChromaAnchorIndex.persistent(tmp_path / "chroma", kb_name="maya")
    index.sync(builder.vectors)
    before = {kind: set(builder.vectors.get(kind).ids) for kind in AnchorKind}
    builder.forget(ForgetRequest(sessions=(sample[-1].session,)))
    report = index.sync(AnchorStore(tmp_path / "kb").load().vectors)
    after = {kind: set(builder.vectors.get(kind).ids) for kind in AnchorKind}
    assert report.deleted >= sum(len(before[k] - after[k]) for k in AnchorKind) > 0
    for kind in AnchorKind:
        assert index.count(kind) == len(after[kind])


# -- generations, rollback, crashes ------------------------------------------------------------


def test_a_rollback_never_returns_to_before_a_forget(tmp_path: Path) -> None:
    folder = tmp_path / "kb"
    utterances = chat()
    builder = llm_builder(folder, FakeChatModel(fused_answer))
    builder.add(utterances[:4])
    builder.add(utterances[4:8])
    old = AnchorStore(folder).current_generation()
    assert old is not None
    kept_aside = tmp_path / "aside"
    shutil.copytree(generation_folder(folder, old), kept_aside)

    builder.forget(ForgetRequest(speakers=("Jonas",)))
    assert all(u.speaker == "Maya" for u in AnchorStore(folder).load().kb.utterances.values())
    with pytest.raises(AnchorStoreError, match="no earlier generation"):
        AnchorStore(folder).rollback()

    # A forget killed before it deleted the old generations leaves them; none of them comes back.
    shutil.copytree(kept_aside, generation_folder(folder, old))
    builder.add([u for u in utterances[8:] if u.speaker == "Maya"])
    assert old not in AnchorStore(folder).generations()  # the next save deletes the leftover
    # Even with the manifest lost and every generation since the forget damaged, the leftover
    # from before it is not made current.
    shutil.copytree(kept_aside, generation_folder(folder, old))
    for generation in AnchorStore(folder).generations():
        if generation != old:
            (generation_folder(folder, generation) / "utterances.json").write_text("damaged")
    (folder / "manifest.json").unlink()
    with pytest.raises(AnchorStoreError, match="no earlier generation loads"):
        AnchorStore(folder).rollback()


def test_a_provider_failure_during_the_rebuild_changes_nothing(tmp_path: Path) -> None:
    folder = tmp_path / "kb"
    llm_builder(folder, FakeChatModel(fused_answer)).add(chat())
    before = kb_data(AnchorStore(folder).load().kb)
    generations = AnchorStore(folder).generations()
    shutil.rmtree(folder / "cache")  # every batch now asks the model, which fails

    def failing(messages: Sequence[Message]) -> str:
        raise ProviderError("the provider is down", provider="fake")

    builder = llm_builder(folder, FakeChatModel(failing))
    with pytest.raises(ProviderError):
        builder.forget(ForgetRequest(sessions=("session_1",)))
    assert kb_data(builder.kb) == before
    assert kb_data(AnchorStore(folder).load().kb) == before
    assert AnchorStore(folder).generations() == generations


def test_a_forget_in_memory_needs_no_store(nlp: Any, sample: list[Utterance]) -> None:
    builder = offline_builder(nlp)
    builder.add(sample)
    report = builder.forget(ForgetRequest(utterances=(sample[0].id,)))
    assert sample[0].id not in builder.kb.utterances
    assert (report.forgotten, report.generation) == (1, None)


# -- mistakes ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("request_args", "message"),
    [
        ({"sessions": ("session_9",)}, r"no session 'session_9' in this KB; it holds: session_1"),
        ({"utterances": ("S9:9",)}, r"no utterance 'S9:9' in this KB; it holds: S1:1"),
        ({"speakers": ("Nobody",)}, r"no speaker 'Nobody' in this KB; it holds: Maya, Jonas"),
    ],
)
def test_a_request_for_what_the_kb_lacks_is_refused_and_changes_nothing(
    tmp_path: Path, request_args: dict[str, Any], message: str
) -> None:
    folder = tmp_path / "kb"
    builder = llm_builder(folder, FakeChatModel(fused_answer))
    builder.add(chat())
    generations = AnchorStore(folder).generations()
    with pytest.raises(ConfigurationError, match=message):
        builder.forget(ForgetRequest(**request_args))
    assert AnchorStore(folder).generations() == generations


def test_requests_that_name_nothing_or_name_it_badly_are_refused() -> None:
    with pytest.raises(ConfigurationError, match="name what to forget"):
        ForgetRequest()
    with pytest.raises(ConfigurationError, match="a list of ids, got the string"):
        ForgetRequest(sessions="session_1")  # type: ignore[arg-type]
    with pytest.raises(ConfigurationError, match="needs a timezone"):
        ForgetRequest(before=datetime(2024, 1, 1))  # noqa: DTZ001


def test_a_forget_with_another_extractor_is_refused(nlp: Any, tmp_path: Path) -> None:
    folder = tmp_path / "kb"
    llm_builder(folder, FakeChatModel(fused_answer)).add(chat())
    with pytest.raises(ConfigurationError, match="built with extractor 'llm:fake:fused'"):
        offline_builder(nlp, AnchorStore(folder)).forget(ForgetRequest(sessions=("session_1",)))
