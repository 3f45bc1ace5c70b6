"""How the query phase behaves on LoCoMo questions of one conversation.

Usage: python benchmarks/locomo_query_check.py KB_DIR LOCOMO_JSON SAMPLE_ID

Prints, for categories 1-4: how many questions get all three blocks, the number of expansions, how
many use the reserved temporal slots, and the per-query time of the query path with the question
embedding precomputed.
"""

from __future__ import annotations

import json
import sys
import time
from collections import Counter

from gravity_core.query.engine import GravityEngine


def main(kb_dir: str, locomo: str, sample_id: str) -> None:
    engine = GravityEngine.from_dir(kb_dir)
    with open(locomo, encoding="utf-8") as handle:
        sample = next(s for s in json.load(handle) if s["sample_id"] == sample_id)
    questions = [q["question"] for q in sample["qa"] if q["category"] != 5]
    vectors = engine.embedder.embed(questions)
    filled: Counter[int] = Counter()
    expansions: list[int] = []
    temporal = 0
    started = time.perf_counter()
    for question, vector in zip(questions, vectors, strict=True):
        context = engine.query(question, query_embedding=vector)
        blocks = context.blocks
        filled[sum(bool(b) for b in (blocks.topics, blocks.entities, blocks.events))] += 1
        expansions.append(len(context.expansions))
        temporal += any(a.reason == "temporal" for a in context.anchors)
    per_query = (time.perf_counter() - started) / len(questions)
    sys.stdout.write(
        f"{len(questions)} questions: all three blocks {filled[3]}, two {filled[2]}, one {filled[1]}; "
        f"expansions {min(expansions)}-{max(expansions)}; temporal slots used {temporal}; "
        f"{per_query * 1000:.2f} ms per query (question embedding excluded)\n"
    )


if __name__ == "__main__":
    main(*sys.argv[1:4])
