"""A chat app whose chain is built once: sessions added to the KB by other processes reach it live.

The app starts a LangChain chain (``build_gravity_chain``) and a LlamaIndex query engine (with
``GravityNodePostprocessor``) once, over one ``GravityEngine.from_dir`` engine, and never rebuilds
them. Meanwhile another process adds the next session to the KB folder:

- session 3 with ``gravity build session_3.jsonl -o KB`` (the CLI, in a subprocess);
- session 4 with the Python API (``AnchorBuilder(...).add``), in a subprocess running this file
  with ``--add-session 4``.

The engine follows its folder: before each query it checks (one ``stat`` of the manifest) whether a
build saved a new generation and, if so, swaps it in whole. So the same question, asked before and
after each add, gets anchors from the new session through both frameworks. The app's own memory (a
vector store per framework) gets each session's turns as they are said, as a chat app's would.
The sessions are those of examples/sample_conversation.jsonl; the models are offline stand-ins
(``FakeListChatModel``, ``MockLLM``), so what is printed is what GRAVITY put in their prompts.

Run from anywhere (offline, about 30 s):

    python cookbook/live_chat_app.py
    python cookbook/live_chat_app.py --workdir /tmp/live-app   # keep the KB to inspect it
"""

from __future__ import annotations

import argparse
import json
import logging
import re
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

from langchain_core.callbacks import BaseCallbackHandler
from langchain_core.documents import Document
from langchain_core.language_models.fake_chat_models import FakeListChatModel
from langchain_core.messages import BaseMessage
from langchain_core.vectorstores import InMemoryVectorStore
from llama_index.core import VectorStoreIndex
from llama_index.core.llms import MockLLM

from gravity_core.build import AnchorBuilder
from gravity_core.embeddings import MiniLMEmbedder
from gravity_core.extract.offline import OfflineExtractor
from gravity_core.loaders import load_conversation
from gravity_core.query.engine import GravityEngine
from gravity_core.schema import Utterance
from gravity_core.storage.store import AnchorStore
from gravity_langchain import ANCHORS_EVENT, GravityEmbeddings, build_gravity_chain
from gravity_llamaindex import (
    AnchorProvider,
    GravityEmbedding,
    GravityNodePostprocessor,
    is_gravity_node,
    nodes_from_utterances,
)

SAMPLE = Path(__file__).resolve().parents[1] / "examples" / "sample_conversation.jsonl"
QUESTION = "What happened with Biscuit?"

logger = logging.getLogger("live_chat_app")


def session(number: int) -> list[Utterance]:
    """The turns of one session of the sample conversation."""
    return [u for u in load_conversation(SAMPLE) if u.session == f"session_{number}"]


def add_session_with_the_api(kb_dir: Path, number: int) -> None:
    """What the writer process runs: one session added to the KB folder with the Python API."""
    embedder = MiniLMEmbedder()
    builder = AnchorBuilder(OfflineExtractor(embedder), embedder, store=AnchorStore(kb_dir))
    report = builder.add(session(number))
    logger.info("writer: %d turns added to %s", report.added, kb_dir)


class PromptSeen(BaseCallbackHandler):
    """The anchors the retriever selected and the system prompt the chat model got, per call."""

    def __init__(self) -> None:
        self.anchors: list[str] = []
        self.system = ""

    def on_custom_event(self, name: str, data: Any, **kwargs: Any) -> None:
        if name == ANCHORS_EVENT:
            self.anchors = [f"{a['kind']} {a['id']}" for a in data["anchors"]]

    def on_chat_model_start(self, serialized: Any, messages: list[list[BaseMessage]], **kwargs: Any) -> None:
        self.system = str(messages[0][0].content)


def anchor_lines(text: str, number: int) -> list[str]:
    """The anchor items in ``text`` that cite a turn of session ``number``, shortened."""
    cited = [line.strip() for line in text.splitlines() if f"session_{number}:" in line]
    return [line if len(line) <= 110 else line[:107] + "..." for line in cited]


def sessions_cited(text: str) -> list[str]:
    """The sessions whose turns the anchors in ``text`` cite, in order."""
    found = {int(n) for n in re.findall(r"session_(\d+):\d+", text)}
    return [f"session_{n}" for n in sorted(found)]


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--workdir", type=Path, help="keep the KB here (default: a temp folder)")
    parser.add_argument("--add-session", type=int, metavar="N", help=argparse.SUPPRESS)  # the writer process
    parser.add_argument("--kb", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.add_session is not None:
        add_session_with_the_api(args.kb, args.add_session)
        return

    with tempfile.TemporaryDirectory(prefix="gravity-live-") as tmp:
        work = args.workdir or Path(tmp)
        work.mkdir(parents=True, exist_ok=True)
        kb_dir = work / "kb"

        # The KB holds sessions 1 and 2 when the app starts; the app's memories hold them too.
        embedder = MiniLMEmbedder()
        AnchorBuilder(OfflineExtractor(embedder), embedder, store=AnchorStore(kb_dir)).add(
            session(1) + session(2)
        )
        host_turns = session(1) + session(2)

        # Started once, never rebuilt: one engine that follows the folder, a chain, a query engine.
        engine = GravityEngine.from_dir(kb_dir, embedder=embedder)  # follow=True is the default
        store = InMemoryVectorStore(GravityEmbeddings(embedder))
        store.add_documents([Document(f"{t.speaker}: {t.text}", id=t.id) for t in host_turns])
        llm = FakeListChatModel(responses=["(the model's answer)"])  # real: ChatOpenAI(model="gpt-4o-mini")
        chain = build_gravity_chain(engine, store, llm, k=4)
        index = VectorStoreIndex(nodes_from_utterances(host_turns), embed_model=GravityEmbedding(embedder))
        # The provider keeps its answers per KB version, so the same question after a session was
        # added gets the new anchors.
        anchors = AnchorProvider(engine)
        query_engine = index.as_query_engine(
            llm=MockLLM(), similarity_top_k=3, node_postprocessors=[GravityNodePostprocessor(anchors)]
        )

        def ask(label: str) -> PromptSeen:
            seen = PromptSeen()
            chain.invoke(QUESTION, config={"callbacks": [seen]})
            response = query_engine.query(QUESTION)
            node = response.source_nodes[0] if response.source_nodes else None
            llama_text = node.node.get_content() if node is not None and is_gravity_node(node) else ""
            print(f"  {label} (KB generation {engine.generation}):")
            print(f"    LangChain  anchors {seen.anchors[:6]}, citing {sessions_cited(seen.system)}")
            print(f"    LlamaIndex anchors citing {sessions_cited(llama_text)}")
            return seen

        turns_now = len(engine.records.utterances)
        print(f"app started: KB generation {engine.generation}, {turns_now} turns; Q: {QUESTION}")
        ask("before")

        writers = {
            3: ("`gravity build` (CLI)", [sys.executable, "-m", "gravity_core", "build"]),
            4: ("the Python API", [sys.executable, str(Path(__file__).resolve())]),
        }
        for number, (how, command) in writers.items():
            turns = session(number)
            # The session is said in the app: its turns join the app's own memories at once ...
            store.add_documents([Document(f"{t.speaker}: {t.text}", id=t.id) for t in turns])
            index.insert_nodes(nodes_from_utterances(turns))
            # ... and another process adds it to GRAVITY's KB when it is over.
            if number == 3:
                conversation = work / f"session_{number}.jsonl"
                records = [
                    {
                        "session": t.session,
                        "speaker": t.speaker,
                        "timestamp": t.timestamp.isoformat(),
                        "text": t.text,
                    }
                    for t in turns
                ]
                conversation.write_text("".join(json.dumps(r) + "\n" for r in records), encoding="utf-8")
                run = [*command, str(conversation), "-o", str(kb_dir), "-q"]
            else:
                run = [*command, "--add-session", str(number), "--kb", str(kb_dir)]
            subprocess.run(run, check=True, capture_output=True)
            print(f"\nsession_{number} ({len(turns)} turns) added to the KB by {how} in another process")
            seen = ask("now")
            print(f"    the chat model's prompt, anchors citing session_{number}:")
            for line in anchor_lines(seen.system, number)[:3]:
                print(f"      {line}")

        print(
            f"\nthe chain and the query engine were built once; the engine served "
            f"{engine.revision + 1} KB versions, now generation {engine.generation} "
            f"({len(engine.records.utterances)} turns)"
        )


if __name__ == "__main__":
    logging.basicConfig(level=logging.WARNING)
    main()
