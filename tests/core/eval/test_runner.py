"""The evaluation loop on a tiny LoCoMo file: budget accounting, expansion searches, the LLM path, reruns."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import pytest

from gravity_core.context.policy import ContextPolicy
from gravity_core.embeddings import HashingEmbedder
from gravity_core.embeddings.base import Matrix
from gravity_core.eval.datasets import EvalSample, load_locomo_eval
from gravity_core.eval.grading import Grader
from gravity_core.eval.hosts import Host, Passage, VectorHost
from gravity_core.eval.results import OVERALL, EvalResults
from gravity_core.eval.runner import run_eval
from gravity_core.eval.settings import HOST_ALONE, EvalConfig, anchor_budget
from gravity_core.llm.base import ChatModel
from gravity_core.query.recipes import PRESETS
from gravity_core.text.tokens import TokenCounter

from .conftest import anchors_answerer, yes_judge

COUNTER = TokenCounter()
BUDGETS = (400, 800)
# The tiny conversation is about 350 tokens: anchors must take a large share to show, and expansions
# places early.
POLICY = ContextPolicy(lead=1, every=2, anchor_share=0.6, host_reserve=0)


class FetchSpyHost:
    """A vector host that records every id it is asked to fetch."""

    def __init__(self, sample: EvalSample) -> None:
        self.inner = VectorHost(sample.utterances, HashingEmbedder(), counter=COUNTER)
        self.fetched: list[str] = []

    @property
    def name(self) -> str:
        return "fetch-spy"

    def search(
        self, queries: Sequence[str], *, vectors: Matrix | None = None, limit: int = 200
    ) -> list[list[Passage]]:
        return self.inner.search(queries, vectors=vectors, limit=limit)

    def fetch(self, turn_ids: Sequence[str]) -> list[Passage]:
        self.fetched.extend(turn_ids)
        return self.inner.fetch(turn_ids)


class SpyHost:
    """A vector host that records every query it is asked."""

    def __init__(self, sample: EvalSample) -> None:
        self.inner = VectorHost(sample.utterances, HashingEmbedder(), counter=COUNTER)
        self.queries: list[str] = []

    @property
    def name(self) -> str:
        return "spy"

    def search(
        self, queries: Sequence[str], *, vectors: Matrix | None = None, limit: int = 200
    ) -> list[list[Passage]]:
        self.queries.extend(queries)
        return self.inner.search(queries, vectors=vectors, limit=limit)


def evaluate(locomo: Path, out: Path, **kwargs: object) -> EvalResults:
    config = EvalConfig(budgets=BUDGETS, llm_budgets=(400,), policy=POLICY, **kwargs)  # type: ignore[arg-type]
    return run_eval(
        load_locomo_eval(locomo),
        benchmark="locomo",
        output_dir=out,
        embedder=HashingEmbedder(),
        config=config,
    )


def test_every_context_fits_its_budget_anchors_included(locomo_tiny: Path, tmp_path: Path) -> None:
    results = evaluate(locomo_tiny, tmp_path, settings=("full", "+E", "+Sum"))
    records = results.records
    assert len(records) == 6 * 4 * len(BUDGETS)  # 6 questions (category 5 skipped), host + 3 settings
    for record in records:
        assert record.context_tokens <= record.budget
        if record.setting == HOST_ALONE:
            assert record.anchor_tokens == 0
        else:
            assert record.anchor_tokens <= anchor_budget(PRESETS[record.setting], record.budget, POLICY)
    with_anchors = [r for r in records if r.setting == "full" and r.anchor_tokens]
    assert with_anchors, "GRAVITY injected nothing on the tiny conversation"
    # The anchors' tokens come out of the host's share: fewer turns than the host alone at that budget.
    alone = {(r.question_id, r.budget): r for r in records if r.setting == HOST_ALONE}
    assert any(r.passages < alone[(r.question_id, r.budget)].passages for r in with_anchors)


def test_summary_has_categories_budgets_and_overall(locomo_tiny: Path, tmp_path: Path) -> None:
    results = evaluate(locomo_tiny, tmp_path, settings=("full",))
    summary = results.summary["vector"]
    cell = summary[HOST_ALONE]["400"]
    assert list(cell) == ["multi-hop", "temporal", "open-domain", "single-hop", OVERALL]
    assert cell[OVERALL]["questions"] == 6
    assert cell["temporal"]["questions"] == 2
    assert summary["full"]["800"][OVERALL]["accuracy"] is None  # no chat model


def test_expansions_are_searched_on_the_host(locomo_tiny: Path, tmp_path: Path) -> None:
    hosts: list[SpyHost] = []

    def factory(sample: EvalSample) -> Host:
        hosts.append(SpyHost(sample))
        return hosts[-1]

    samples = load_locomo_eval(locomo_tiny)
    config = EvalConfig(budgets=(300,), settings=("full", "-expansion"), llm_budgets=())
    results = run_eval(
        samples,
        benchmark="locomo",
        output_dir=tmp_path,
        embedder=HashingEmbedder(),
        hosts=[factory],
        config=config,
    )
    questions = {q.question for s in samples for q in s.questions}
    extra = [q for host in hosts for q in host.queries if q not in questions]
    assert extra, "no expanded query reached the host"
    assert {r.host for r in results.records} == {"spy"}


def test_llm_path_records_gains_and_a_rerun_makes_no_call(locomo_tiny: Path, tmp_path: Path) -> None:
    samples = load_locomo_eval(locomo_tiny)
    config = EvalConfig(budgets=BUDGETS, settings=("full", "+E"), llm_budgets=(400,), policy=POLICY)

    def run(answerer: ChatModel, judge: ChatModel) -> EvalResults:
        grader = Grader(answerer, judge, cache_dir=tmp_path / "llm_cache")
        return run_eval(
            samples,
            benchmark="locomo",
            output_dir=tmp_path,
            embedder=HashingEmbedder(),
            config=config,
            grader=grader,
        )

    first_answerer, first_judge = anchors_answerer(), yes_judge()
    first = run(first_answerer, first_judge)
    answered = [r for r in first.records if r.prediction is not None]
    # host alone and full at 400 tokens only (+E is not in llm_settings)
    assert {(r.setting, r.budget) for r in answered} == {(HOST_ALONE, 400), ("full", 400)}
    assert all(r.f1 is not None and r.correct is not None for r in answered)
    # identical prompts (same context, or same question, gold and answer) are asked once
    assert 0 < len(first_answerer.calls) <= len(answered)
    assert 0 < len(first_judge.calls) <= len(answered)
    assert first.info["model_calls"] == len(first_answerer.calls) + len(first_judge.calls)
    (comparison,) = first.comparisons
    full_with_anchors = {r.question_id for r in answered if r.setting == "full" and r.anchor_tokens}
    assert set(comparison.gains) == full_with_anchors and comparison.losses == []

    again_answerer, again_judge = anchors_answerer(), yes_judge()
    again = run(again_answerer, again_judge)
    assert again.info["model_calls"] == 0
    assert again_answerer.calls == [] and again_judge.calls == []
    assert [r.correct for r in again.records] == [r.correct for r in first.records]


def test_a_rerun_reuses_the_kbs_and_embeddings(locomo_tiny: Path, tmp_path: Path) -> None:
    evaluate(locomo_tiny, tmp_path, settings=("full",))
    manifests = sorted(p.read_text() for p in tmp_path.glob("kbs/*/*/manifest.json"))
    embeddings = sorted(p.name for p in (tmp_path / "embeddings").glob("*.npy"))
    assert len(manifests) == 2 and embeddings
    evaluate(locomo_tiny, tmp_path, settings=("full",))
    assert sorted(p.read_text() for p in tmp_path.glob("kbs/*/*/manifest.json")) == manifests
    assert sorted(p.name for p in (tmp_path / "embeddings").glob("*.npy")) == embeddings


def test_unknown_setting_is_refused() -> None:
    with pytest.raises(ValueError, match="unknown setting"):
        EvalConfig(settings=("full", "+X"))


def test_a_budget_too_small_for_anchors_gives_the_hosts_own_context(
    locomo_tiny: Path, tmp_path: Path
) -> None:
    # At 150 tokens (of the 350 the conversation has) the anchors' share, 90, is below the minimum
    # (100): GRAVITY adds no text, nor its expanded queries' hits, which would otherwise take every
    # place after the question's first; the source turns it fetches by provenance (none here,
    # source_every 0) are all it could add.
    policy = ContextPolicy(
        lead=1, every=1, anchor_share=0.6, host_reserve=0, min_anchor_tokens=100, source_every=0
    )
    config = EvalConfig(budgets=(150,), settings=("full", "expansions"), llm_budgets=(), policy=policy)
    results = run_eval(
        load_locomo_eval(locomo_tiny),
        benchmark="locomo",
        output_dir=tmp_path,
        embedder=HashingEmbedder(),
        config=config,
    )

    def window(setting: str) -> dict[str, tuple[object, ...]]:
        return {
            r.question_id: (r.context_tokens, r.passages, r.evidence_recall, r.covered, r.anchor_tokens)
            for r in results.records
            if r.setting == setting
        }

    assert window("full") == window(HOST_ALONE)
    assert window("expansions") != window(HOST_ALONE), "the expansions changed nothing here"


def test_source_turns_are_fetched_by_id_and_placed_without_anchor_text(
    locomo_tiny: Path, tmp_path: Path
) -> None:
    hosts: list[FetchSpyHost] = []

    def factory(sample: EvalSample) -> Host:
        hosts.append(FetchSpyHost(sample))
        return hosts[-1]

    def run(policy: ContextPolicy, out: Path) -> EvalResults:
        return run_eval(
            load_locomo_eval(locomo_tiny),
            benchmark="locomo",
            output_dir=out,
            embedder=HashingEmbedder(),
            hosts=[factory],
            config=EvalConfig(budgets=(120,), settings=("sources",), llm_budgets=(), policy=policy),
        )

    # No bound on what the fetched turns take: the tiny budget would leave them no place.
    unbounded = {"max_source_turn_share": 1.0, "max_sources_share": 1.0}
    placed = run(
        ContextPolicy(source_lead=0, source_every=1, sources_per_anchor=1, **unbounded), tmp_path / "a"
    )
    assert hosts[-1].fetched, "no source turn was fetched"
    sample = load_locomo_eval(locomo_tiny)[0]
    assert set(hosts[-1].fetched) <= {u.id for u in sample.utterances}
    cells = {(r.setting, r.question_id): r for r in placed.records}
    assert all(r.anchor_tokens == 0 for r in placed.records if r.setting == "sources")
    changed = [
        q
        for (setting, q) in cells
        if setting == "sources"
        and (
            (cells["sources", q].evidence_recall, cells["sources", q].passages)
            != (cells[HOST_ALONE, q].evidence_recall, cells[HOST_ALONE, q].passages)
            or cells["sources", q].context_tokens != cells[HOST_ALONE, q].context_tokens
        )
    ]
    assert changed, "the fetched source turns changed no context"
    hosts.clear()
    off = run(ContextPolicy(source_every=0), tmp_path / "b")
    assert not hosts[-1].fetched
    assert [(r.evidence_recall, r.context_tokens) for r in off.records if r.setting == "sources"] == [
        (r.evidence_recall, r.context_tokens) for r in off.records if r.setting == HOST_ALONE
    ]
