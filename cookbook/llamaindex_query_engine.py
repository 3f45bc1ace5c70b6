"""A LlamaIndex query engine with GRAVITY's fusion retriever and node postprocessor.

The host memory is a ``VectorStoreIndex`` over the conversation, one node per turn. The same
question is asked of two query engines over that index:

- plain: ``index.as_query_engine()``, one vector search;
- GRAVITY: ``GravityFusionRetriever`` runs the question's search and adds the selected anchors'
  source turns, fetched from the index by id (GRAVITY's expanded queries are searched too only under
  a policy that places them, ``EXPANDING_POLICY``); ``GravityNodePostprocessor`` then puts the
  anchor blocks (topic summaries, entity profiles, event records) first in the context.

``MockLLM`` stands in for the LLM: it answers with the prompt it was given, so the script can show
what GRAVITY added. The script prints the turns each engine retrieved, marks the turns that hold
the answer, and shows the start of the prompt the LLM got.

Run from anywhere (offline, about 10 s):

    python cookbook/llamaindex_query_engine.py
    python cookbook/llamaindex_query_engine.py --question "Who is Femi?"
"""

from __future__ import annotations

import argparse
import re
from pathlib import Path

from llama_index.core import VectorStoreIndex
from llama_index.core.llms import MockLLM
from llama_index.core.query_engine import RetrieverQueryEngine

from gravity_core.build import AnchorBuilder
from gravity_core.embeddings import MiniLMEmbedder
from gravity_core.extract.offline import OfflineExtractor
from gravity_core.loaders import load_conversation
from gravity_core.query.engine import GravityEngine
from gravity_llamaindex import (
    AnchorProvider,
    GravityEmbedding,
    GravityFusionRetriever,
    GravityNodePostprocessor,
    is_gravity_node,
    nodes_from_utterances,
)

CITED = re.compile(r"(session_\d+:\d+)")
SAMPLE = Path(__file__).resolve().parents[1] / "examples" / "sample_conversation.jsonl"

# Questions with the turns that answer them (checked by hand), to see what each engine found.
QUESTIONS = {
    "What did Maya do in March 2024?": {"session_3:2", "session_3:6", "session_3:10", "session_4:3"},
    "Who is Biscuit?": {"session_3:12", "session_5:1"},
}


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--question", action="append", help="ask this instead (repeatable)")
    parser.add_argument("--top-k", type=int, default=4, help="turns each engine retrieves")
    args = parser.parse_args(argv)
    questions = {q: set() for q in args.question} if args.question else QUESTIONS

    # 1. The anchors, built offline in memory (AnchorStore(dir) would keep them, see the README).
    turns = load_conversation(SAMPLE)
    embedder = MiniLMEmbedder()
    builder = AnchorBuilder(OfflineExtractor(embedder), embedder)
    builder.add(turns)
    engine = GravityEngine.from_builder(builder)
    # One provider shared by the retriever and the postprocessor: GRAVITY runs once per question.
    anchors = AnchorProvider(engine)

    # 2. The host memory: any LlamaIndex index works (ChromaVectorStore in a StorageContext, ...).
    index = VectorStoreIndex(nodes_from_utterances(turns), embed_model=GravityEmbedding(embedder))
    llm = MockLLM()  # real: from llama_index.llms.openai import OpenAI; llm = OpenAI(model="gpt-4o-mini")

    # 3. Two query engines over the same index.
    plain = index.as_query_engine(llm=llm, similarity_top_k=args.top_k)
    gravity = RetrieverQueryEngine.from_args(
        GravityFusionRetriever.from_index(index, anchors, similarity_top_k=args.top_k),
        llm=llm,
        node_postprocessors=[GravityNodePostprocessor(anchors)],  # keep it last, after any reranker
    )

    for question, evidence in questions.items():
        print(f"\nQ: {question}")
        for name, query_engine in (("plain", plain), ("GRAVITY", gravity)):
            response = query_engine.query(question)
            anchor_nodes = [n for n in response.source_nodes if is_gravity_node(n)]
            ids = [n.node.node_id for n in response.source_nodes if not is_gravity_node(n)]
            what = ("anchor node + " if anchor_nodes else "") + f"turns {ids}"
            if evidence:
                what += f": {len(evidence & set(ids))}/{len(evidence)} answer turns"
            if anchor_nodes and evidence:
                # The anchors cite their source turns in square brackets: [session_3:2, ...].
                cited = evidence & set(CITED.findall(anchor_nodes[0].node.get_content())) - set(ids)
                what += f", {len(cited)} more cited by the anchors"
            print(f"  {name:<8} {what}")
        if anchor_nodes:
            events = anchor_nodes[0].node.get_content().partition("# Event Records")[2]
            print("  event records GRAVITY added:")
            for record in events.partition("</event_records>")[0].strip().splitlines():
                print(f"    {record[:120]}")
        # MockLLM answered with its prompt: GRAVITY's anchors lead the context, the turns follow.
        print(f"  prompt the LLM got starts: {str(response).splitlines()[2][:100]}...")


if __name__ == "__main__":
    main()
