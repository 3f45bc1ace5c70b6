"""One KB shared by several processes through a Chroma server.

A service often runs several workers (web workers, job runners) that must answer from the same
memory. Here:

1. this process builds the KB (a folder of JSON, read by every worker), puts the anchors' vectors
   into a Chroma server with ``ChromaAnchorIndex.server(...).sync(...)`` and the conversation turns
   (the host memory) into a LangChain ``Chroma`` collection on the same server;
2. three worker processes start at once; each opens the KB with
   ``GravityEngine.from_dir(kb, index=ChromaAnchorIndex.server(...))`` (the vectors stay on the
   server: the sync finds nothing to write) and answers questions with ``GravityRetriever`` over the
   shared collection;
3. this process checks that every worker got the same anchors and the same turns.

Without --chroma the script starts ``chroma run`` itself on a free port and stops it at the end.

Run from anywhere (offline, about 20 s):

    python cookbook/shared_kb_chroma_server.py
    chroma run --path /tmp/chroma --port 8000 &
    python cookbook/shared_kb_chroma_server.py --chroma 127.0.0.1:8000
"""

from __future__ import annotations

import argparse
import multiprocessing
import os
import tempfile
import time
from contextlib import ExitStack
from pathlib import Path
from typing import Any

from chroma_server import running_chroma

SAMPLE = Path(__file__).resolve().parents[1] / "examples" / "sample_conversation.jsonl"
KB_NAME = "sample-conversation"  # names the anchor collections on the server
TURNS_COLLECTION = "sample-conversation-turns"
QUESTIONS = ["Where does Maya work now?", "What happened with Biscuit?", "How is Jonas's knee?"]


def host_memory(host: str, port: int, embedder: Any) -> Any:
    """The conversation's turns on the Chroma server, as a LangChain vector store."""
    import chromadb
    from chromadb.config import Settings
    from langchain_chroma import Chroma

    from gravity_langchain import GravityEmbeddings

    client = chromadb.HttpClient(host=host, port=port, settings=Settings(anonymized_telemetry=False))
    return Chroma(
        collection_name=TURNS_COLLECTION, embedding_function=GravityEmbeddings(embedder), client=client
    )


def worker(number: int, kb_dir: str, host: str, port: int) -> dict[str, Any]:
    """One worker process: open the shared KB and answer the questions (in its own order)."""
    from gravity_core.embeddings import MiniLMEmbedder
    from gravity_core.query.engine import GravityEngine
    from gravity_core.query.index import ChromaAnchorIndex
    from gravity_core.storage.store import AnchorStore
    from gravity_langchain import GravityRetriever

    embedder = MiniLMEmbedder()
    index = ChromaAnchorIndex.server(host, port, KB_NAME)
    written = index.sync(AnchorStore(kb_dir).load().vectors).writes  # 0: the server already holds them
    engine = GravityEngine.from_dir(kb_dir, embedder=embedder, index=index)
    retriever = GravityRetriever(engine=engine, vector_store=host_memory(host, port, embedder), k=4)
    answers = {}
    for question in QUESTIONS[number % len(QUESTIONS) :] + QUESTIONS[: number % len(QUESTIONS)]:
        anchors = [f"{a.kind.value}:{a.id}" for a in engine.query(question).anchors]
        turns = [doc.id for doc in retriever.invoke(question)]
        answers[question] = {"anchors": anchors, "turns": turns}
    return {"worker": number, "pid": os.getpid(), "written": written, "answers": answers}


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--chroma", help="HOST:PORT of a running Chroma server (default: start one)")
    parser.add_argument("--workers", type=int, default=3)
    parser.add_argument("--workdir", type=Path, help="keep the KB (and a started server's data) here")
    args = parser.parse_args(argv)

    from langchain_core.documents import Document

    from gravity_core.build import AnchorBuilder
    from gravity_core.embeddings import MiniLMEmbedder
    from gravity_core.extract.offline import OfflineExtractor
    from gravity_core.loaders import load_conversation
    from gravity_core.query.index import ChromaAnchorIndex
    from gravity_core.schema import AnchorKind
    from gravity_core.storage.store import AnchorStore

    with ExitStack() as stack:
        workdir = args.workdir or Path(
            stack.enter_context(tempfile.TemporaryDirectory(prefix="gravity-shared-"))
        )
        if args.chroma:
            host, _, port_text = args.chroma.rpartition(":")
            port = int(port_text)
        else:
            host, port = stack.enter_context(running_chroma(workdir / "chroma"))
            print(f"started `chroma run` on {host}:{port}")

        # 1. Build the KB once, then index it into the server: anchors and conversation turns.
        turns = load_conversation(SAMPLE)
        embedder = MiniLMEmbedder()
        kb_dir = workdir / "kb"
        builder = AnchorBuilder(OfflineExtractor(embedder), embedder, store=AnchorStore(kb_dir))
        builder.add(turns)
        index = ChromaAnchorIndex.server(host, port, KB_NAME)
        synced = index.sync(builder.vectors)
        print(
            f"anchors on the server: {synced.upserted} vectors written "
            f"({', '.join(index.collection_name(kind) for kind in AnchorKind)})"
        )
        turns_store = host_memory(host, port, embedder)
        turns_store.add_documents([Document(f"{t.speaker}: {t.text}", id=t.id) for t in turns])
        print(f"turns on the server: {len(turns)} documents in '{TURNS_COLLECTION}'")

        # 2. The workers, all at once ("spawn": fresh interpreters, as separate services would be).
        started = time.perf_counter()
        context = multiprocessing.get_context("spawn")
        with context.Pool(args.workers) as pool:
            results = pool.starmap(worker, [(n, str(kb_dir), host, port) for n in range(args.workers)])
        print(f"{args.workers} workers answered in {time.perf_counter() - started:.1f} s")
        for result in results:
            print(f"\nworker {result['worker']} (pid {result['pid']}): wrote {result['written']} vectors")
            for question, found in result["answers"].items():
                print(f"  {question:<30} anchors {found['anchors'][:4]}  turns {found['turns']}")

        # 3. One memory, one answer: every worker saw the same anchors and turns.
        agree = all(r["answers"][q] == results[0]["answers"][q] for r in results for q in QUESTIONS)
        print(f"\nall workers agree: {agree}")


if __name__ == "__main__":
    main()
