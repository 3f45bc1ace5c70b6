"""Evaluating on LoCoMo, and reading the numbers and the plots.

``run_eval`` builds a KB per conversation (offline extractor, MiniLM), then, for every question,
fills a context window of a fixed token budget (800, 1500 and 3000 cl100k tokens) with the host
memory alone (plain vector retrieval of turns) and with the host plus GRAVITY (anchors take at most
a quarter of the budget; the selected anchors' source turns join the host's ranking, and GRAVITY's
expanded queries too with ``EvalConfig(policy=EXPANDING_POLICY)``, the paper's query expansion, or
``gravity eval --expansion-every 1``). Offline, it
scores what an answering model would see:

- evidence recall: the share of the question's gold evidence turns present as raw turns;
- answer coverage: whether every content word of the gold answer is in the context (anchors too).

With ``--model provider:name`` (e.g. openai:gpt-4o-mini and OPENAI_API_KEY) a chat model also
answers and judges, which adds LLM-judge accuracy and token F1.

This recipe runs one conversation and a spread of its questions (about 20 s). The command line
does the same, on everything by default (``gravity eval locomo --help``):

    gravity eval locomo ../shared/data/locomo/locomo_dev.json --samples conv-26 -o gravity-eval/locomo

LoCoMo is CC BY-NC 4.0 and not shipped: point --locomo (or $LOCOMO) at your copy. Run:

    python cookbook/locomo_eval.py                               # conv-26, 40 questions
    python cookbook/locomo_eval.py --sample conv-30 --questions 0 --output /tmp/eval   # all questions
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import sys
import tempfile
from pathlib import Path

from gravity_core.eval import EvalConfig, Grader, SGMemHost, load_locomo_eval, run_eval, vector_host_factory
from gravity_core.eval.report import write_outputs
from gravity_core.providers import load_chat_model, load_embedder
from gravity_core.text.tokens import TokenCounter

REPO = Path(__file__).resolve().parents[1]
LOCOMO = Path(os.environ.get("LOCOMO", REPO.parent / "shared" / "data" / "locomo" / "locomo_dev.json"))
SETTINGS = (
    "full",
    "+E",
    "+V",
    "+T",
    "-expansion",
)  # the method and a few ablations (see gravity_core.query.recipes)

# What each plot shows, by file-name suffix (one set per host: vector_..., sgmem_...).
PLOTS = {
    "_coverage_by_category.png": "answer coverage per question category, host alone (blue) vs host + GRAVITY "
    "(orange), one panel per budget: where GRAVITY adds the answer's words",
    "_recall_by_category.png": "evidence recall per category, same layout: whether GRAVITY's source "
    "turns bring the gold turns themselves into the context",
    "_accuracy_by_category.png": "LLM-judge accuracy per category (only with --model)",
    "_vs_budget.png": "coverage (left) and evidence recall (right) against the budget, one line per "
    "setting: the thick lines are the host alone and the full method, thin ones the ablations; a "
    "line above the host's at a smaller budget means the same coverage for fewer tokens",
}


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--locomo", type=Path, default=LOCOMO, help="the LoCoMo JSON file")
    parser.add_argument("--sample", default="conv-26", help="the conversation (sample_id)")
    parser.add_argument("--questions", type=int, default=40, help="a spread of this many questions (0: all)")
    parser.add_argument("--embedder", default="minilm", help="minilm (default) or hashing (fast, crude)")
    parser.add_argument("--sgmem", action="store_true", help="also evaluate SGMem as the host")
    parser.add_argument("--model", help="answer and judge with this chat model, e.g. openai:gpt-4o-mini")
    parser.add_argument("--output", type=Path, help="the run folder (default: a new temp folder, kept)")
    args = parser.parse_args(argv)
    if not args.locomo.exists():
        sys.exit(f"LoCoMo not found at {args.locomo}: pass --locomo PATH or set LOCOMO (it is not shipped)")
    output = args.output or Path(tempfile.mkdtemp(prefix="gravity-eval-"))

    # 1. The conversation and a spread of its questions (every category is represented).
    (sample,) = load_locomo_eval(args.locomo, samples=[args.sample])
    questions = sample.questions
    if args.questions and len(questions) > args.questions:
        step = len(questions) / args.questions
        questions = [questions[int(i * step)] for i in range(args.questions)]
    sample = dataclasses.replace(sample, questions=questions)
    print(f"{sample.id}: {len(sample.utterances)} turns, {len(questions)} questions")

    # 2. The hosts: plain vector retrieval of turns, and optionally SGMem.
    embedder, counter = load_embedder(args.embedder), TokenCounter()
    hosts = [vector_host_factory(embedder, counter=counter, cache_dir=output / "embeddings")]
    if args.sgmem:
        hosts.append(
            lambda s: SGMemHost(s.utterances, embedder, counter=counter, directory=output / "sgmem" / s.id)
        )
    grader = Grader(load_chat_model(args.model), cache_dir=output / "llm_cache") if args.model else None

    # 3. Run, then write results.json, report.md and the plots.
    results = run_eval(
        [sample],
        benchmark="locomo",
        output_dir=output,
        embedder=embedder,
        hosts=hosts,
        config=EvalConfig(settings=SETTINGS),
        grader=grader,
        counter=counter,
    )
    written = write_outputs(results, output)

    # 4. The headline numbers, read back from results.json as any other tool would.
    data = json.loads(Path(written["json"]).read_text(encoding="utf-8"))
    print(f"\nresults: {written['json']}\nreport:  {written['report']}")
    for host, settings in data["summary"].items():
        print(f"\n{host}: overall, host alone -> host + GRAVITY (full)")
        for budget in data["config"]["budgets"]:
            alone, full = settings["host"][str(budget)]["overall"], settings["full"][str(budget)]["overall"]
            line = (
                f"  {budget:>5} tokens: answer coverage {alone['answer_coverage']:.3f} -> "
                f"{full['answer_coverage']:.3f}, evidence recall {alone['evidence_recall']:.3f} -> "
                f"{full['evidence_recall']:.3f} (anchors: {full['anchor_tokens']:.0f} tokens)"
            )
            if full["accuracy"] is not None:
                line += f", accuracy {alone['accuracy']:.3f} -> {full['accuracy']:.3f}"
            print(line)
        by_category = settings["full"]["1500"]
        gains = {
            c: by_category[c]["answer_coverage"] - settings["host"]["1500"][c]["answer_coverage"]
            for c in data["categories"]
            if by_category.get(c, {}).get("answer_coverage") is not None
        }
        print(
            "  coverage gain by category at 1500 tokens: "
            + ", ".join(f"{c} {gain:+.3f}" for c, gain in gains.items())
        )
    for goal in data["goals"]:
        print(
            f"goal ({goal['host']}): {'met' if goal['met'] else 'not met'}: {goal['setting']} at "
            f"{goal['budget']} tokens covers {goal['coverage']:.3f} vs the host alone at "
            f"{goal['reference_budget']} tokens {goal['reference_coverage']:.3f}"
        )

    # 5. The plots, and how to read them.
    print("\nplots:")
    for key, path in written.items():
        if key.startswith("plot:"):
            meaning = next(text for suffix, text in PLOTS.items() if str(path).endswith(suffix))
            print(f"  {path}\n      {meaning}")


if __name__ == "__main__":
    main()
