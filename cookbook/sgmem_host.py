"""SGMem as the host memory, with and without GRAVITY, at the same token budget.

SGMem (a sentence-graph memory shipped in ``gravity_core.sgmem``) splits the conversation into
sessions, rounds, turns and sentences, links similar sentences across turns, and answers a question
with the turn (or round, or session) chunks its search and graph walk reach, within a token budget.
``SGMemWithGravity`` runs GRAVITY on top, unchanged: SGMem retrieves for the question and the anchor
blocks lead the context (GRAVITY's expanded queries are searched in SGMem too only under a policy
that places them, ``EXPANDING_POLICY``).

For a few questions with a gold answer and answer turns marked by hand, the script compares, at
the same total budget, SGMem alone with SGMem + GRAVITY (part of the budget goes to the anchors):
whether the context holds the answer's words, and which answer turns it holds as raw text. It ends
with SGMem as the store of a LangChain chain.

The sample conversation is short (about 5,800 tokens), so a 1,000-token budget already holds a
sixth of it and SGMem alone finds most answers; the script shows how to compare, not which wins.
For a measurement, run the LoCoMo recipe with --sgmem (cookbook/locomo_eval.py).

Run from anywhere (offline, about 10 s):

    python cookbook/sgmem_host.py
    python cookbook/sgmem_host.py --budget 1200 --anchor-budget 300 --granularity round
"""

from __future__ import annotations

import argparse
from pathlib import Path

from langchain_core.language_models.fake_chat_models import FakeListChatModel

from gravity_core.build import AnchorBuilder
from gravity_core.eval.metrics import answer_covered, text_words
from gravity_core.extract.offline import OfflineExtractor
from gravity_core.loaders import load_conversation
from gravity_core.query.config import QueryConfig
from gravity_core.query.engine import GravityEngine
from gravity_core.sgmem import SGMem, SGMemWithGravity
from gravity_langchain import build_gravity_chain
from gravity_langchain.sgmem import SGMemRetriever

SAMPLE = Path(__file__).resolve().parents[1] / "examples" / "sample_conversation.jsonl"

# Questions, a short gold answer, and the turns that hold it (marked by hand).
QUESTIONS = [
    ("When did Maya sign the lease on her flat in Redland?", "6 March 2024", {"session_3:2"}),
    (
        "Which hospital did Maya leave, and where does she work now?",
        "Northwind, Harbourside",
        {"session_1:4", "session_3:4"},
    ),
    ("What exercises is Jonas doing for his knee?", "resistance band", {"session_2:10"}),
    ("What pottery studio does Maya go to in Bristol?", "Mudlark", {"session_3:9", "session_4:15"}),
    ("When is Lena visiting with Theo?", "June", {"session_5:13", "session_6:8"}),
    ("What did Jonas's brother Tomas do in March?", "parkrun", {"session_3:15"}),
]


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--budget", type=int, default=1000, help="total cl100k tokens of the context")
    parser.add_argument(
        "--anchor-budget", type=int, default=300, help="of which GRAVITY's anchors take at most"
    )
    parser.add_argument("--granularity", default="turn", choices=["turn", "round", "session"])
    args = parser.parse_args(argv)

    # 1. SGMem over the conversation (the packaged offline MiniLM embeds every unit once).
    turns = load_conversation(SAMPLE)
    memory = SGMem.from_utterances(turns)
    print(f"SGMem: {memory.stats()}")

    # 2. GRAVITY's KB from the same turns, with the same embedder; the anchors get their own budget.
    builder = AnchorBuilder(OfflineExtractor(memory.embedder), memory.embedder)
    builder.add(turns)
    engine = GravityEngine.from_builder(builder)
    both = SGMemWithGravity(memory, engine, anchor_config=QueryConfig(token_budget=args.anchor_budget))

    # 3. The same questions, the same total budget. A context "covers" an answer when it holds all
    #    the answer's content words (the offline measure of `gravity eval`); "turns" are the
    #    answer turns present as raw text.
    covered = {"alone": 0, "gravity": 0}
    turns_found = {"alone": 0, "gravity": 0}
    for question, answer, evidence in QUESTIONS:
        alone = memory.retrieve(question, token_budget=args.budget, granularity=args.granularity)
        with_gravity = both.retrieve(
            question, token_budget=args.budget - args.anchor_budget, granularity=args.granularity
        )
        print(f"\nQ: {question}   (answer: {answer}; in {', '.join(sorted(evidence))})")
        rows = [
            ("alone", "SGMem alone    ", alone.text, alone.tokens, alone.utterance_ids, ""),
            (
                "gravity",
                "SGMem + GRAVITY",
                with_gravity.text,  # the anchors, then SGMem's chunks
                with_gravity.tokens,
                with_gravity.memory.utterance_ids,
                f" ({with_gravity.anchors.tokens} in anchors)" if with_gravity.anchors.tokens else "",
            ),
        ]
        for name, label, text, tokens, ids, of_which in rows:
            found = sorted(evidence & set(ids))
            hit = answer_covered(answer, text_words(text))
            covered[name] += hit
            turns_found[name] += len(found)
            outcome = f"answer {'covered' if hit else 'missing'}, answer turns {found or 'none'}"
            print(f"  {label} {tokens:>4} tokens{of_which}: {outcome}")

    wanted = sum(len(evidence) for _, _, evidence in QUESTIONS)
    print(
        f"\nat {args.budget} tokens: answers covered: SGMem alone {covered['alone']}/{len(QUESTIONS)}, "
        f"SGMem + GRAVITY {covered['gravity']}/{len(QUESTIONS)}; answer turns as raw text: "
        f"alone {turns_found['alone']}/{wanted}, with GRAVITY {turns_found['gravity']}/{wanted}"
    )

    # 4. In LangChain, SGMem is a retriever like any other, so GRAVITY's chain takes it as the host.
    llm = FakeListChatModel(
        responses=["Mudlark, on Thursday evenings."]
    )  # real: ChatOpenAI(model="gpt-4o-mini")
    host = SGMemRetriever(sgmem=memory, k=4, granularity=args.granularity)
    chain = build_gravity_chain(engine, host, llm, k=4)
    print(f"\nLangChain chain over SGMem: {chain.invoke('What pottery studio does Maya go to in Bristol?')}")


if __name__ == "__main__":
    main()
