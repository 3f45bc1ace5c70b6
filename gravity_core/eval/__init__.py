"""The evaluation harness: hosts alone and with GRAVITY on LoCoMo and LongMemEval.

Offline it measures what an answering model would see (evidence recall, answer coverage at fixed
token budgets); with a chat model it also answers, judges and scores token F1. The command line is
``gravity eval locomo PATH`` / ``gravity eval longmemeval PATH``; in Python::

    samples = load_locomo_eval("locomo10.json")
    results = run_eval(samples, benchmark="locomo", output_dir="run", embedder=MiniLMEmbedder())
    write_outputs(results, "run")

Importing this package loads no model and imports neither matplotlib nor nltk.
"""

from gravity_core.eval.context import ContextWindow
from gravity_core.eval.datasets import (
    LOCOMO_CATEGORIES,
    EvalQuestion,
    EvalSample,
    load_locomo_eval,
    load_longmemeval_eval,
)
from gravity_core.eval.embedding_cache import EmbeddingCache
from gravity_core.eval.grading import Grade, Grader
from gravity_core.eval.hosts import Host, Passage, VectorHost, render_turn
from gravity_core.eval.metrics import answer_covered, content_words, evidence_recall, locomo_f1, token_f1
from gravity_core.eval.report import markdown_report, write_outputs
from gravity_core.eval.results import EvalResults, GoalCheck, QuestionRecord
from gravity_core.eval.runner import HostFactory, run_eval, vector_host_factory
from gravity_core.eval.settings import ABLATION_SETTINGS, DEFAULT_BUDGETS, HOST_ALONE, EvalConfig
from gravity_core.eval.sgmem_host import SGMemHost, sgmem_available

__all__ = [
    "ABLATION_SETTINGS",
    "DEFAULT_BUDGETS",
    "HOST_ALONE",
    "LOCOMO_CATEGORIES",
    "ContextWindow",
    "EmbeddingCache",
    "EvalConfig",
    "EvalQuestion",
    "EvalResults",
    "EvalSample",
    "GoalCheck",
    "Grade",
    "Grader",
    "Host",
    "HostFactory",
    "Passage",
    "QuestionRecord",
    "SGMemHost",
    "VectorHost",
    "answer_covered",
    "content_words",
    "evidence_recall",
    "load_locomo_eval",
    "load_longmemeval_eval",
    "locomo_f1",
    "markdown_report",
    "render_turn",
    "run_eval",
    "sgmem_available",
    "token_f1",
    "vector_host_factory",
    "write_outputs",
]
