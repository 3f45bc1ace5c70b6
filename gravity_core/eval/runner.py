"""The evaluation loop: per sample, build the KB, rank with each host, assemble contexts, score.

Per question the expensive parts run once and are reused: the question is embedded once (and shared
by the host and GRAVITY); GRAVITY's selection and expansions are computed once per setting, and only
the trimming of its blocks depends on the budget; each host ranking (question or expansion) is
computed once per sample and fused once per setting; the budgets only change how far the fused
ranking is read.
"""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Protocol

import numpy as np

from gravity_core.context.policy import ContextPolicy, MergedHit
from gravity_core.context.provenance import pair_sources
from gravity_core.embeddings.base import Embedder
from gravity_core.eval.context import ContextWindow
from gravity_core.eval.datasets import EvalQuestion, EvalSample
from gravity_core.eval.embedding_cache import EmbeddingCache
from gravity_core.eval.grading import Grader
from gravity_core.eval.hosts import FetchingHost, Host, Passage, VectorHost
from gravity_core.eval.kbs import sample_engine
from gravity_core.eval.metrics import answer_covered, evidence_recall, locomo_f1, text_words, token_f1
from gravity_core.eval.results import EvalResults, QuestionRecord, check_goal, compare, summarize
from gravity_core.eval.settings import (
    ANCHORS_ALONE,
    EXPANSIONS_ALONE,
    HOST_ALONE,
    SOURCES_ALONE,
    EvalConfig,
    anchor_budget,
    preset_of,
)
from gravity_core.extract.base import Extractor
from gravity_core.query.config import ContextMode
from gravity_core.query.engine import GravityEngine
from gravity_core.query.types import AnchorContext
from gravity_core.text.tokens import TokenCounter

__all__ = ["HostFactory", "ProgressCallback", "policy_hits", "run_eval", "vector_host_factory"]

logger = logging.getLogger(__name__)

HostFactory = Callable[[EvalSample], Host]
"""Makes a host over one sample's conversation."""


class ProgressCallback(Protocol):
    """Told how far a stage is, e.g. ``("questions", 120, 762)``.

    Stages: ``"samples"``, ``"questions"``, ``"llm"``.
    """

    def __call__(self, stage: str, done: int, total: int) -> None:
        """Report progress."""
        ...


def vector_host_factory(
    embedder: Embedder, *, counter: TokenCounter, cache_dir: str | os.PathLike[str] | None = None
) -> HostFactory:
    """A factory of :class:`VectorHost`, with the turn embeddings cached in ``cache_dir``."""
    cache = EmbeddingCache(cache_dir, embedder) if cache_dir is not None else None

    def make(sample: EvalSample) -> Host:
        return VectorHost(sample.utterances, embedder, counter=counter, cache=cache)

    return make


def policy_hits(
    policy: ContextPolicy,
    question: str,
    expansions: Sequence[str],
    rankings: dict[str, list[Passage]],
    sourced: Sequence[tuple[str, Passage]] = (),
) -> list[MergedHit[Passage]]:
    """The host's passages for a question as the integrations return them, each with why it is there.

    That is the question's ranking merged with the source turns fetched by provenance
    (``sourced``) and its expansions' rankings by ``policy`` (``rankings`` holds each query's host
    ranking).
    """
    return policy.merge(
        question,
        rankings[question],
        expansions,
        [rankings[e] for e in expansions],
        key=lambda p: p.id,
        sourced=sourced,
    )


@dataclass
class _Job:
    """A record the chat model must answer, with what it needs."""

    record: QuestionRecord
    question: EvalQuestion
    context: str


class _SampleRun:
    """One sample under one host: every setting and budget for every question."""

    def __init__(
        self,
        sample: EvalSample,
        engine: GravityEngine,
        host: Host,
        config: EvalConfig,
        query_cache: EmbeddingCache,
        keep_context: bool,
    ) -> None:
        self.sample = sample
        self.engine = engine
        self.host = host
        self.config = config
        self.query_cache = query_cache
        self.keep_context = keep_context
        self._words: dict[str, frozenset[str]] = {}

    def run(self, on_question: Callable[[], None]) -> tuple[list[QuestionRecord], list[_Job]]:
        questions = self.sample.questions
        if not questions:
            return [], []
        texts = [q.question for q in questions]
        vectors = self.query_cache.embed(texts)
        contexts = {
            setting: [self._anchor_context(q, v, setting) for q, v in zip(questions, vectors, strict=True)]
            for setting in self.config.gravity_settings
            if preset_of(setting).mode is ContextMode.ANCHORS
        }
        rankings = self._rankings(texts, vectors, contexts)
        records: list[QuestionRecord] = []
        jobs: list[_Job] = []
        for index, question in enumerate(questions):
            for setting in self.config.all_settings:
                context = contexts[setting][index] if setting in contexts else None
                sourced = self._sourced(context) if setting not in (EXPANSIONS_ALONE, ANCHORS_ALONE) else []
                expansions = context.expansions if context is not None and setting != SOURCES_ALONE else []
                ranking = policy_hits(self.config.policy, question.question, expansions, rankings, sourced)
                # With no room for anchor text the chain searches without expansions.
                unexpanded = (
                    policy_hits(self.config.policy, question.question, [], rankings, sourced)
                    if expansions and self.config.policy.every
                    else ranking
                )
                for budget in self.config.budgets:
                    window = self._window(
                        question, vectors[index], setting, context, ranking, unexpanded, budget
                    )
                    record = self._record(question, setting, budget, window)
                    records.append(record)
                    if self.keep_context and self.config.answered(setting, budget):
                        jobs.append(_Job(record, question, window.text))
            on_question()
        return records, jobs

    def _anchor_context(self, question: EvalQuestion, vector: np.ndarray, setting: str) -> AnchorContext:
        unbudgeted = preset_of(setting).model_copy(update={"token_budget": None})
        return self.engine.query(
            question.question, config=unbudgeted, query_embedding=vector, question_date=question.question_date
        )

    def _rankings(
        self, questions: list[str], vectors: np.ndarray, contexts: dict[str, list[AnchorContext]]
    ) -> dict[str, list[Passage]]:
        asked = set(questions)
        expansions = sorted(
            {e for per_question in contexts.values() for c in per_question for e in c.expansions} - asked
        )
        all_vectors = np.vstack([vectors, self.query_cache.embed(expansions)]) if expansions else vectors
        texts = [*questions, *expansions]
        ranked = self.host.search(texts, vectors=all_vectors, limit=self.config.search_depth)
        return dict(zip(texts, ranked, strict=True))

    def _sourced(self, context: AnchorContext | None) -> list[tuple[str, Passage]]:
        """The passages holding the selected anchors' source turns, each with its anchor."""
        if context is None or not isinstance(self.host, FetchingHost):
            return []
        turns = self.config.policy.source_turns(context.sources)
        if not turns:
            return []
        fetched = self.host.fetch([turn.utterance_id for turn in turns])
        return pair_sources(turns, fetched, lambda p: p.turn_ids, key=lambda p: p.id)

    def _window(
        self,
        question: EvalQuestion,
        vector: np.ndarray,
        setting: str,
        context: AnchorContext | None,
        ranking: list[MergedHit[Passage]],
        unexpanded: list[MergedHit[Passage]],
        budget: int,
    ) -> ContextWindow:
        """The context window of ``question`` under ``setting``, within ``budget`` tokens.

        ``ranking``: the policy's merge of the question's hits, the source turns and the
        expansions' hits; ``unexpanded``: the same without the expansions.
        """
        if setting in (HOST_ALONE, EXPANSIONS_ALONE, SOURCES_ALONE):
            return ContextWindow.assemble(ranking, budget, policy=self.config.policy)
        if setting == ANCHORS_ALONE and context is not None:
            text, tokens = self.engine.fit_anchors(context, budget)
            return ContextWindow.assemble([], budget, anchors_text=text, anchors_tokens=tokens)
        preset = preset_of(setting)
        limit = anchor_budget(preset, budget, self.config.policy)
        if limit == 0:  # too small a budget for anchors: the host's context, as the chain gives it
            return ContextWindow.assemble(unexpanded, budget, policy=self.config.policy)
        if context is None:  # the +Sum baseline: summaries, selected per budget
            summaries = self.engine.query(
                question.question,
                config=preset.model_copy(update={"token_budget": limit}),
                query_embedding=vector,
                question_date=question.question_date,
            )
            return ContextWindow.assemble(
                ranking,
                budget,
                anchors_text=summaries.text,
                anchors_tokens=summaries.tokens,
                policy=self.config.policy,
            )
        text, tokens = self.engine.fit_anchors(context, limit)
        return ContextWindow.assemble(
            ranking, budget, anchors_text=text, anchors_tokens=tokens, policy=self.config.policy
        )

    def _passage_words(self, passage: Passage) -> frozenset[str]:
        words = self._words.get(passage.id)
        if words is None:
            words = self._words[passage.id] = frozenset(text_words(passage.text))
        return words

    def _record(
        self, question: EvalQuestion, setting: str, budget: int, window: ContextWindow
    ) -> QuestionRecord:
        words: set[str] = set(text_words(window.anchors_text)) if window.anchors_text else set()
        for passage in window.passages:
            words |= self._passage_words(passage)
        return QuestionRecord(
            question_id=question.id,
            sample_id=self.sample.id,
            category=question.category,
            host=self.host.name,
            setting=setting,
            budget=budget,
            evidence_recall=evidence_recall(question.evidence, window.turn_ids),
            covered=None if question.rubric else answer_covered(question.answer, words, question.question),
            context_tokens=window.tokens,
            anchor_tokens=window.anchors_tokens,
            passages=len(window.passages),
        )


def _grade(
    jobs: Sequence[_Job], grader: Grader, benchmark: str, config: EvalConfig, progress: ProgressCallback
) -> None:
    done = 0
    progress("llm", 0, len(jobs))

    def one(job: _Job) -> None:
        question = job.question
        grade = grader.grade(
            question.question, question.answer, job.context, question_date=question.question_date
        )
        job.record.prediction = grade.prediction
        job.record.correct = grade.correct
        if benchmark == "locomo":
            job.record.f1 = locomo_f1(grade.prediction, question.answer, question.category)
        else:
            job.record.f1 = token_f1(grade.prediction, question.answer)

    with ThreadPoolExecutor(max_workers=config.concurrency) as pool:
        for _ in pool.map(one, jobs):
            done += 1
            progress("llm", done, len(jobs))


def _no_progress(stage: str, done: int, total: int) -> None:
    del stage, done, total


def run_eval(
    samples: Sequence[EvalSample],
    *,
    benchmark: str,
    output_dir: str | os.PathLike[str],
    embedder: Embedder,
    extractor: Extractor | None = None,
    hosts: Sequence[HostFactory] | None = None,
    config: EvalConfig | None = None,
    grader: Grader | None = None,
    counter: TokenCounter | None = None,
    progress: ProgressCallback | None = None,
) -> EvalResults:
    """Run every host alone and with GRAVITY over the samples, and score each question.

    The output folder keeps what reruns reuse: ``kbs/`` (one KB per sample), ``embeddings/``
    (turn and query embeddings as ``.npy``). The chat model's cache is the grader's.

    Args:
        samples: the benchmark samples (see :mod:`gravity_core.eval.datasets`).
        benchmark: ``"locomo"`` (LoCoMo's F1 rules) or another name (plain token F1).
        output_dir: the run's folder.
        embedder: embeds anchors, turns and queries (the KBs are built with it).
        extractor: builds the KBs (default: the offline extractor).
        hosts: host factories (default: plain vector retrieval of turns).
        config: settings, budgets and fusion parameters.
        grader: answers and judges with a chat model; without it only the offline metrics are computed.
        counter: the token counter (cl100k).
        progress: told how far each stage is.

    Returns:
        The per-question records and the figures computed from them.
    """
    config = config or EvalConfig()
    counter = counter or TokenCounter()
    progress = progress or _no_progress
    root = Path(output_dir)
    if extractor is None:
        from gravity_core.extract.choice import make_extractor

        extractor = make_extractor(embedder)
    embeddings = root / "embeddings"
    host_factories = (
        list(hosts)
        if hosts is not None
        else [vector_host_factory(embedder, counter=counter, cache_dir=embeddings)]
    )
    query_cache = EmbeddingCache(embeddings, embedder)
    started = time.monotonic()
    records: list[QuestionRecord] = []
    jobs: list[_Job] = []
    total_questions = sum(len(s.questions) for s in samples) * len(host_factories)
    answered = 0
    progress("samples", 0, len(samples))
    progress("questions", 0, total_questions)
    for number, sample in enumerate(samples, start=1):
        engine = sample_engine(sample, root / "kbs", extractor, embedder, counter=counter)
        for factory in host_factories:
            host = factory(sample)

            def tick() -> None:
                nonlocal answered
                answered += 1
                progress("questions", answered, total_questions)

            run = _SampleRun(sample, engine, host, config, query_cache, keep_context=grader is not None)
            sample_records, sample_jobs = run.run(tick)
            records.extend(sample_records)
            jobs.extend(sample_jobs)
        progress("samples", number, len(samples))
    offline_seconds = time.monotonic() - started
    if grader is not None and jobs:
        _grade(jobs, grader, benchmark, config, progress)
    categories = list(dict.fromkeys(c for s in samples for c in s.categories))
    summary = summarize(records, categories)
    hosts_seen = list(summary)
    goals = [goal for h in hosts_seen if (goal := check_goal(summary, h)) is not None]
    info = {
        "samples": len(samples),
        "questions": sum(len(s.questions) for s in samples),
        "hosts": hosts_seen,
        "extractor": extractor.name,
        "embedder": embedder.name,
        "offline_seconds": round(offline_seconds, 1),
        "total_seconds": round(time.monotonic() - started, 1),
        "model_calls": grader.calls if grader is not None else 0,
        "cache_hits": grader.hits if grader is not None else 0,
        "answerer": grader.answerer.model_name if grader is not None else None,
        "judge": grader.judge.model_name if grader is not None else None,
    }
    return EvalResults(
        benchmark=benchmark,
        config=asdict(config),
        categories=categories,
        records=records,
        summary=summary,
        comparisons=compare(records),
        goals=goals,
        info=info,
    )
