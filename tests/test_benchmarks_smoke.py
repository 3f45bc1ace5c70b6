"""The benchmarks run end to end on a tiny LoCoMo file and report well-formed results (no timing asserted)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from benchmarks import (
    build_cost,
    build_speed,
    fanout,
    forget_speed,
    long_build,
    many_users,
    memory,
    query_overhead,
)
from benchmarks.__main__ import run_all
from benchmarks.common import (
    BenchSettings,
    ModelCallCounter,
    Result,
    count_model_calls,
    ratio,
    time_interleaved,
    verdict,
)
from benchmarks.fakes import TokenMeter, fake_answer
from benchmarks.report import load_results, markdown_table
from benchmarks.synthetic import anchor_count, grow_kb, grow_rows, grow_streamed
from benchmarks.workspace import Workspace
from gravity_core.build import plan_batches
from gravity_core.loaders.locomo import load_locomo
from gravity_core.prompts import PromptContext, build_fused_messages
from gravity_core.schema import AnchorKind
from gravity_core.storage.anchor_vectors import EXPANSION_KIND, TURN_KIND
from gravity_core.storage.store import AnchorStore
from gravity_core.testing import FakeChatModel

TINY = Path(__file__).parent / "fixtures" / "locomo_tiny.json"


@pytest.fixture(scope="module")
def workspace(tmp_path_factory: pytest.TempPathFactory) -> Workspace:
    settings = BenchSettings.tiny(TINY, "demo-1")
    return Workspace(settings, tmp_path_factory.mktemp("bench"))


def _check(result: Result, *, sides: set[str]) -> None:
    assert set(result.sides) >= sides
    assert result.ratios, "a benchmark reports at least one ratio"
    for r in result.ratios:
        assert set(r) == {"name", "value", "target", "met", "note"}
        assert isinstance(r["value"], float) and np.isfinite(r["value"])
        assert r["met"] is None if r["target"] is None else r["met"] == (r["value"] <= r["target"])


def test_query_overhead_reports_each_size_and_zero_model_calls(workspace: Workspace) -> None:
    result = query_overhead.run(workspace.settings, workspace)
    _check(result, sides={"gravity", "gravity_same_names", "host", "host_by_vector"})
    assert set(result.figures) == {
        "50",
        "200",
        "400",
    }  # the last one saved part by part, loaded from its folder
    for size, figures in result.figures.items():
        assert figures["model_calls"] == 0
        assert figures["host_rows"] == figures["anchors"]
        sides = ("gravity", "host", "host_by_vector") + (("gravity_same_names",) if size != "400" else ())
        for side in sides:
            assert figures[side]["n"] == workspace.settings.query_repeats * len(workspace.questions[0])
            assert figures[side]["p50_ms"] <= figures[side]["p95_ms"]
    assert "gravity_same_names" not in result.figures["400"]
    assert (workspace.root / "saved-kb-400").is_dir()  # kept for the memory benchmark
    calls = [r for r in result.ratios if r["name"].startswith("model calls")]
    assert [r["value"] for r in calls] == [0.0, 0.0, 0.0]


def test_fanout_counts_embedding_calls_per_question(workspace: Workspace) -> None:
    result = fanout.run(workspace.settings, workspace)
    _check(
        result, sides={"retriever", "retriever_batched", "retriever_unstored", "retriever_default", "host"}
    )
    assert "EXPANDING_POLICY" in result.title
    calls = result.figures["embedding_calls_per_question"]
    assert calls["batched"] == calls["retriever"]  # the one-request path embeds nothing more
    stored = result.figures["share_of_expansions_stored_by_the_build"]
    assert 0.0 < stored <= 1.0
    # The question always; the expansions the build did not store in at most one more call.
    assert calls["retriever"] == 1.0 if stored == 1.0 else 1.0 < calls["retriever"] <= 2.0
    assert calls["unstored"] == 2.0
    assert calls["host"] == 1.0
    # The shipped default: the question embedded once and searched once, no expansion.
    assert calls["default"] == 1.0
    assert result.figures["default_store_searches_per_question"] == 1.0
    assert result.figures["retriever_store_searches_per_question"] > 1.0


def test_build_cost_counts_every_mode_and_entity_memory(workspace: Workspace) -> None:
    result = build_cost.run(workspace.settings, workspace)
    _check(result, sides={"gravity", "entity_memory"})
    builds = result.figures["builds"]
    assert set(builds) == {"modules@2", "fused@2", "modules@4", "fused@4", "ConversationEntityMemory"}
    samples = [load_locomo(TINY, sample) for sample in result.figures["samples"]]
    for batch in (2, 4):
        # Three calls per batch of one session; one per batch filled across sessions.
        per_session = sum(len(plan_batches(turns, batch)) for turns in samples)
        spanning = sum(len(plan_batches(turns, batch, spans_sessions=True)) for turns in samples)
        assert builds[f"modules@{batch}"]["calls"] == 3 * per_session
        assert builds[f"fused@{batch}"]["calls"] == spanning
        assert builds[f"fused@{batch}"]["failed_batches"] == 0
    assert builds["fused@4"]["calls"] == 3 < sum(len(plan_batches(turns, 4)) for turns in samples)
    # No target at batches other than the 40.
    assert all(r["target"] is None for r in result.ratios)
    memory_row = builds["ConversationEntityMemory"]
    # One extraction call per turn pair, plus at least one summary call (the speaker is always named).
    assert memory_row["calls"] > result.figures["utterances"] / 2
    assert all(row["prompt_tokens"] > 0 and row["completion_tokens"] > 0 for row in builds.values())


def test_build_speed_gives_build_and_incremental_results(workspace: Workspace) -> None:
    speed, incremental = build_speed.run(workspace.settings, workspace)
    _check(speed, sides={"build", "encoder"})
    _check(incremental, sides={"add", "rebuild"})
    assert set(speed.figures["seconds_per_sample"]) == {"demo-1", "demo-2"}
    assert incremental.figures["new_session_turns"] == {"demo-1": 2, "demo-2": 2}


def test_memory_measures_each_mode_in_a_subprocess(workspace: Workspace) -> None:
    result = memory.run(workspace.settings, workspace)
    _check(result, sides={"baseline", "load", "query"})
    assert "load_s" not in result.figures["baseline"]
    sizes = result.figures["sizes"]
    assert list(sizes) == [str(n) for n in workspace.settings.memory_sizes]
    for figures in sizes.values():
        assert figures["load"]["maxrss_mb"] > 0 and "load_s" in figures["load"]
        assert figures["query"]["query_peak_mb"] >= 0 and figures["query"]["query_p50_ms"] > 0
    # The larger KB holds about twice the anchors of the smaller one.
    assert 1.5 < sizes["400"]["anchors"] / sizes["200"]["anchors"] < 2.5
    per_anchor = [r for r in result.ratios if r["name"].startswith("KB RSS per anchor")]
    assert len(per_anchor) == 2 and all(r["target"] == memory.PER_ANCHOR_KB for r in per_anchor)


def test_long_build_reports_time_per_utterance_at_each_size(workspace: Workspace) -> None:
    result = long_build.run(workspace.settings, workspace)
    _check(result, sides={"60", "240"})
    assert result.figures["sizes"] == [60, 240]
    for size in ("60", "240"):
        figures = result.figures["by_size"][size]
        assert figures["ms_per_utterance"] > 0 and figures["events"] > 0
        assert (
            figures["checkpoints_and_final_save"] == figures["generations_saved"] + figures["journal_records"]
        )
    assert len(result.figures["by_size"]["60"]["seconds"]) == long_build.schedule((60, 240)).count(60)
    assert [r["target"] for r in result.ratios] == [long_build.TARGET]


def test_forget_reports_forget_against_rebuild_and_that_both_give_one_kb(workspace: Workspace) -> None:
    result = forget_speed.run(workspace.settings, workspace)
    _check(result, sides={"forget", "rebuild"})
    sessions = list(dict.fromkeys(u.session for u in workspace.utterances))
    ends = [sessions[0], sessions[len(sessions) // 2], sessions[-1]]
    assert result.figures["forgotten_sessions"] == list(dict.fromkeys(ends))
    assert set(result.figures["forget_equals_rebuild"].values()) == {True}
    assert [r["target"] for r in result.ratios] == [forget_speed.FORGET_TARGET]


@pytest.mark.loopback  # a Dask cluster on 127.0.0.1
def test_many_users_reports_throughput_per_worker_count_and_one_kb_per_user(workspace: Workspace) -> None:
    result = many_users.run(workspace.settings, workspace)
    _check(result, sides={"pool-1", "pool-2", "dask-2"})
    sides = result.figures["sides"]
    assert set(sides) == {"pool-1", "pool-2", "dask-2"}
    for side, figures in sides.items():
        assert figures["failed"] == [] and figures["same_kbs_as_pool-1"] is True, side
        assert figures["worker_processes"] == (1 if side == "pool-1" else 2), side
        assert figures["peak_rss_mb_per_worker"] > 0
    assert [r["name"] for r in result.ratios] == [
        "throughput pool-2 / pool-1",
        "throughput dask-2 / pool-1",
        "peak RSS per worker (MB)",
    ]


def test_long_build_schedule_spreads_the_small_sizes_between_the_large() -> None:
    assert long_build.schedule((2_000, 8_000, 32_000)) == [2_000, 8_000, 32_000, 2_000, 2_000, 2_000]
    assert long_build.schedule((60, 240)) == [60, 240]


def test_run_all_writes_json_and_the_table(workspace: Workspace, tmp_path: Path) -> None:
    run_all(workspace.settings, workspace, ["build_cost"], tmp_path)
    written = json.loads((tmp_path / "build_cost.json").read_text(encoding="utf-8"))
    assert written["name"] == "build_cost" and written["environment"]["cpus"]
    table = markdown_table(load_results(tmp_path))
    assert table.count("\n") == 1 + len(written["ratios"])
    assert "fused calls per utterance, batch 2" in table


def test_grown_kb_is_consistent_and_renamed(workspace: Workspace) -> None:
    kb, vectors = workspace.seed
    grown = grow_kb(kb, vectors, 10 * anchor_count(kb), rename=True)
    assert grown.replicas == 10 and grown.anchors == 10 * anchor_count(kb)
    assert len(grown.kb.utterances) == 10 * len(kb.utterances)
    for event in grown.kb.events.values():
        assert all(source in grown.kb.utterances for source in event.sources)
        assert all(who in grown.kb.entities for who in event.who_ids)
    seed_names = {e.name for e in kb.entities.values()}
    copies = [e for e in grown.kb.entities.values() if e.id.startswith("r3/")]
    assert copies and not {e.name for e in copies} & seed_names
    for kind in AnchorKind:
        assert grown.vectors.get(kind).matrix.shape[0] == len(grown.vectors.get(kind).ids)
    same = grow_kb(kb, vectors, 3 * anchor_count(kb), rename=False)
    assert {e.name for e in same.kb.entities.values()} == seed_names


def test_a_streamed_kb_saves_the_grown_kb_but_its_turn_vectors(workspace: Workspace, tmp_path: Path) -> None:
    kb, vectors = workspace.seed
    streamed, streamed_vectors = grow_streamed(kb, vectors, 5 * anchor_count(kb))
    AnchorStore(tmp_path / "streamed").save(streamed, streamed_vectors)
    grown = grow_kb(kb, vectors, 5 * anchor_count(kb))
    loaded = AnchorStore(tmp_path / "streamed").load()
    assert loaded.kb.to_dict() == grown.kb.to_dict()
    assert streamed.anchors == grown.anchors
    assert loaded.vectors.get(TURN_KIND).ids == []  # saved empty: only a build reads them
    for kind in (AnchorKind.ENTITY.value, AnchorKind.EVENT.value, EXPANSION_KIND):
        assert loaded.vectors.get(kind).ids == grown.vectors.get(kind).ids
        assert np.array_equal(loaded.vectors.get(kind).matrix, grown.vectors.get(kind).matrix)


def test_grow_rows_copies_with_new_ids() -> None:
    matrix = np.eye(3, dtype=np.float32)
    ids, texts, rows = grow_rows(["a", "b", "c"], ["x", "y", "z"], matrix, 7)
    assert ids == ["a", "b", "c", "r1/a", "r1/b", "r1/c", "r2/a"]
    assert texts[3:] == ["x", "y", "z", "x"]
    assert rows.shape == (7, 3)
    assert np.allclose(np.linalg.norm(rows, axis=1), 1.0, atol=1e-5)


def test_time_interleaved_alternates_which_side_goes_first() -> None:
    order: list[str] = []
    samples = time_interleaved(
        {"a": lambda i: order.append("a"), "b": lambda i: order.append("b")}, [0, 1], repeats=1, warmup=0
    )
    assert order == ["a", "b", "b", "a"]
    assert {k: len(v) for k, v in samples.items()} == {"a": 2, "b": 2}


def test_model_call_counter_sees_a_model_call() -> None:
    model = FakeChatModel(["ok", "ok"])
    assert count_model_calls(lambda _: model.complete([{"role": "user", "content": "hi"}]), [0, 1]) == 2
    with ModelCallCounter() as counter:
        sum(range(10))
    assert counter.calls == 0


def test_ratio_verdict() -> None:
    assert ratio("x", 0.3, 0.25)["met"] is False
    assert ratio("x", 0.25, 0.25)["met"] is True
    assert ratio("x", 9.0, None)["met"] is None
    assert verdict(ratio("x", 0.45, 0.25)) == "MISSED by 0.2, 1.80x the target"
    assert verdict(ratio("x", 0.2, 0.25)) == "met"
    assert verdict(ratio("x", 9.0, None)) == ""


def test_fake_answers_gravity_and_entity_memory_prompts() -> None:
    prompt = (
        "<CONVERSATION>\n[D1:1] (8 May 2023) Ann: I moved to Paris.\n[D1:2] (8 May 2023) Bo: Nice!\n"
        '</CONVERSATION>\n{"title": "FusedExtraction"}'
    )
    answer = json.loads(fake_answer(prompt))
    assert {e["name"] for e in answer["entities"]} == {"Ann", "Bo"}
    assert answer["events"][0]["sources"] == ["D1:1"]
    assert answer["topics"][0]["sources"] == ["D1:1", "D1:2"]
    # The prompt GRAVITY sends: the outline names the task, the turns carry no date of their own.
    turns = load_locomo(TINY, "demo-1")
    fused = build_fused_messages(PromptContext(utterances=tuple(turns)))
    answer = json.loads(fake_answer("\n".join(m["content"] for m in fused)))
    assert {source for e in answer["entities"] for source in e["sources"]} == {u.id for u in turns}
    extraction = "Last line of conversation (for extraction):\nHuman: Ann: I met Carol in Rome.\n\nOutput:"
    assert fake_answer(extraction) == "Ann, Carol, Rome"
    meter = TokenMeter()
    meter.gravity_model().complete([{"role": "user", "content": prompt}])
    assert (
        meter.calls == 1 and meter.conversation_tokens > 0 and meter.prompt_tokens > meter.conversation_tokens
    )


def test_published_table_is_the_committed_results() -> None:
    """The benchmark report (docs/benchmarks.md) shows exactly the figures in benchmarks/results/."""
    root = Path(__file__).resolve().parents[1]
    results = load_results(root / "benchmarks" / "results")
    if not results:
        pytest.skip("no benchmark results committed")
    assert markdown_table(results) in (root / "docs" / "benchmarks.md").read_text(encoding="utf-8")
