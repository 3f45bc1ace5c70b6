"""Building the KB with OpenAI through langchain-openai, then answering with the same model.

``LLMExtractor`` turns the conversation into entities, events and topics with a chat model
(``fused=True``: one request per batch of 40 turns, filled across sessions).
``LangChainChatModel`` makes any LangChain chat model that model; here ``ChatOpenAI``, which is
asked through ``with_structured_output`` and whose answers GRAVITY validates (re-asking on a bad
one). Answers are cached beside the KB, so a rebuild or a resumed build makes no request.

- With ``OPENAI_API_KEY`` set, the script uses OpenAI for real (``--model``, default gpt-4o-mini:
  three extraction requests and one answer for the sample conversation, well under a cent).
- Without it, ``ChatOpenAI`` talks to a local fake of the OpenAI API (cookbook/fake_openai.py) that
  answers with the recorded extractions in cookbook/data/openai_recorded.json: the same client,
  requests and parsing, offline.

The command line builds the same way:
``gravity build examples/sample_conversation.jsonl -o kb --extractor llm --model openai:gpt-4o-mini``.

Run from anywhere (needs the ``openai`` extra: pip install 'gravity-memory[openai]'):

    python cookbook/openai_langchain_build.py
    OPENAI_API_KEY=sk-... python cookbook/openai_langchain_build.py --question "Who is Femi?"
"""

from __future__ import annotations

import argparse
import os
import tempfile
from contextlib import ExitStack
from pathlib import Path
from typing import Any

from fake_openai import FakeOpenAI, recorded_answers
from langchain_core.callbacks import BaseCallbackHandler
from langchain_core.documents import Document
from langchain_core.outputs import LLMResult
from langchain_core.vectorstores import InMemoryVectorStore
from langchain_openai import ChatOpenAI
from pydantic import SecretStr

from gravity_core.build import AnchorBuilder
from gravity_core.build.stats import kb_stats
from gravity_core.embeddings import MiniLMEmbedder
from gravity_core.extract.llm import LLMExtractor
from gravity_core.llm.cache import ResponseCache
from gravity_core.loaders import load_conversation
from gravity_core.query.engine import GravityEngine
from gravity_core.storage.store import AnchorStore
from gravity_langchain import GravityEmbeddings, LangChainChatModel, build_gravity_chain

HERE = Path(__file__).resolve().parent
SAMPLE = HERE.parent / "examples" / "sample_conversation.jsonl"
RECORDING = HERE / "data" / "openai_recorded.json"


class Usage(BaseCallbackHandler):
    """Counts the model's requests and tokens (from the usage OpenAI reports)."""

    def __init__(self) -> None:
        self.requests = self.prompt_tokens = self.completion_tokens = 0

    def on_llm_end(self, response: LLMResult, **kwargs: Any) -> None:
        self.requests += 1
        usage = (response.llm_output or {}).get("token_usage") or {}
        self.prompt_tokens += usage.get("prompt_tokens", 0)
        self.completion_tokens += usage.get("completion_tokens", 0)

    def take(self) -> str:
        """A summary since the last call, then start counting again."""
        text = f"{self.requests} requests, {self.prompt_tokens} prompt + {self.completion_tokens} completion"
        self.requests = self.prompt_tokens = self.completion_tokens = 0
        return text


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--model", default="gpt-4o-mini", help="OpenAI chat model")
    parser.add_argument("--question", default="Where does Maya work now, and since when?")
    parser.add_argument("--workdir", type=Path, help="keep the KB here (default: a temp folder)")
    args = parser.parse_args(argv)

    with ExitStack() as stack:
        workdir = args.workdir or Path(
            stack.enter_context(tempfile.TemporaryDirectory(prefix="gravity-openai-"))
        )

        # 1. The chat model: OpenAI with a key, else the same client pointed at the local fake.
        usage = Usage()
        if os.environ.get("OPENAI_API_KEY"):
            chat = ChatOpenAI(model=args.model, temperature=0, callbacks=[usage])
            print(f"model: OpenAI {args.model}")
        else:
            fake = stack.enter_context(FakeOpenAI(recorded_answers(RECORDING)))
            chat = ChatOpenAI(  # real: chat = ChatOpenAI(model="gpt-4o-mini", temperature=0)
                model=args.model,
                temperature=0,
                callbacks=[usage],
                base_url=fake.url,
                api_key=SecretStr("fake"),
            )
            print(f"model: {args.model} on a local fake of the OpenAI API ({fake.url}), recorded answers")

        # 2. Build: one request per 40 turns; the answers are cached under <kb>/cache.
        turns = load_conversation(SAMPLE)
        # The anchors' vectors stay offline; LangChainEmbedder(OpenAIEmbeddings()) would work too.
        embedder = MiniLMEmbedder()
        store = AnchorStore(workdir / "kb")
        model = LangChainChatModel(chat, name=f"openai:{args.model}")
        extractor = LLMExtractor(model, fused=True, cache=ResponseCache(store.cache_dir))
        builder = AnchorBuilder(extractor, embedder, store=store)
        report = builder.add(turns)
        failed = report.failed_batches
        print(f"build: {report.added} turns in {report.batches} batches, {failed} failed; {usage.take()}")
        stats = kb_stats(builder.kb)
        shown = ["entities", "events", "events_with_date", "topics", "topics_multi_session"]
        print("KB: " + ", ".join(f"{stats[k]} {k}" for k in [*shown, "state_transitions"]))

        # 3. Building again adds nothing; a rebuild from scratch replays the cache: no request either.
        again = AnchorBuilder(extractor, embedder, store=store).add(turns)
        print(f"build again: {again.added} added, {again.skipped} already known; {usage.take()}")
        rebuilt = AnchorBuilder(extractor, embedder, store=AnchorStore(workdir / "kb-rebuilt")).add(turns)
        print(f"rebuild from scratch: {rebuilt.added} turns; {usage.take()} (answers from the cache)")

        # 4. What the model extracted about Maya: attributes, and how they changed over time.
        maya = builder.kb.entities["maya"]
        print("Maya now: " + "; ".join(f"{a.name}: {a.value}" for a in maya.current_attributes()))
        for change in maya.transitions:
            since = f"since {change.when.date()}, {change.sources}"
            print(f"  {change.attribute}: {change.old} -> {change.new} ({since})")
        # Relative times ("yesterday", "on Wednesday") resolved against the session's date.
        dated = [
            e for e in builder.kb.events.values() if e.when is not None and e.when.raw and "Maya" in e.who
        ]
        for event in sorted(dated, key=lambda e: e.said_at)[:8]:
            if event.when is not None:
                said = f"{event.when.raw!r} said {event.said_at.date()}"
                print(f"  event: {said} -> {event.when.label()} | {event.what}")

        # 5. Answer with the same model: GRAVITY's retrieval over a vector store of the turns.
        engine = GravityEngine.from_dir(workdir / "kb", embedder=embedder)
        vectors = InMemoryVectorStore(GravityEmbeddings(embedder))
        vectors.add_documents([Document(f"{t.speaker}: {t.text}", id=t.id) for t in turns])
        answer = build_gravity_chain(engine, vectors, chat, k=4).invoke(args.question)
        print(f"\nQ: {args.question}\nA: {answer}\n({usage.take()})")


if __name__ == "__main__":
    main()
