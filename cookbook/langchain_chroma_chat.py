"""A LangChain chat over a long conversation, with GRAVITY beside a Chroma vector store.

The bot already shares months of history with its user: here the 96 turns (6 sessions, January to
June 2024) of examples/sample_conversation.jsonl, or any LoCoMo sample (--conversation, --sample).
That history is kept twice, from the same turns:

- in Chroma, one document per turn: the host memory any LangChain app would have;
- in a GRAVITY KB of entity, event and topic anchors, built offline (no model, no key).

Each new question goes through ``build_gravity_chain``: the question searches Chroma, the selected
anchors' source turns are fetched from it by id, the anchors join the prompt, and the turns of the
current chat ride along as ``history``. (GRAVITY's expanded queries are made but, with the shipped
policy, not searched; ``policy=EXPANDING_POLICY`` searches them.) The script prints, per question,
the anchors GRAVITY chose, the turns the retriever returned and the answer.

Run from anywhere (offline, about 10 s):

    python cookbook/langchain_chroma_chat.py
    python cookbook/langchain_chroma_chat.py --conversation ../shared/data/locomo/locomo_dev.json \\
        --sample conv-26 --question "When did Caroline go to the LGBTQ support group?"
"""

from __future__ import annotations

import argparse
import tempfile
from pathlib import Path
from typing import Any

from langchain_chroma import Chroma
from langchain_core.callbacks import BaseCallbackHandler
from langchain_core.documents import Document
from langchain_core.language_models.fake_chat_models import FakeListChatModel
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage

from gravity_core.build import AnchorBuilder
from gravity_core.embeddings import MiniLMEmbedder
from gravity_core.extract.offline import OfflineExtractor
from gravity_core.loaders import load_conversation
from gravity_core.query.engine import GravityEngine
from gravity_core.storage.store import AnchorStore
from gravity_langchain import ANCHORS_EVENT, GravityEmbeddings, build_gravity_chain

SAMPLE = Path(__file__).resolve().parents[1] / "examples" / "sample_conversation.jsonl"

# The new chat: what the user asks now, and what a model would answer (the fake replays these).
QUESTIONS = [
    "Where does Maya work now?",
    "And when did she adopt Biscuit?",
    "How did Jonas's half marathon go?",
]
ANSWERS = [
    "Maya is a charge nurse at Harbourside Children's Hospital in Bristol; she started on 2 April 2024.",
    "She picked Biscuit up from Second Chance Rescue in mid-April 2024, after the home visit on 5 April.",
    "Jonas ran the Avon Valley Half Marathon on 19 May 2024 in 1:54:37, with Maya and Biscuit cheering.",
]


class ShowRetrieval(BaseCallbackHandler):
    """Prints what GRAVITY selected and what the retriever returned, as the chain runs."""

    def on_custom_event(self, name: str, data: Any, **kwargs: Any) -> None:
        if name == ANCHORS_EVENT:
            chosen = ", ".join(f"{a['kind']} {a['id']} ({a['score']:.2f})" for a in data["anchors"][:6])
            print(f"  anchors:  {chosen}")
            print(
                f"  expanded: {len(data['expansions'])} queries made"
                " (not searched: the shipped policy places none)"
            )

    def on_retriever_end(self, documents: Any, **kwargs: Any) -> None:
        for doc in documents:
            # "question": the question's own hit; "provenance": a selected anchor's source turn,
            # fetched from Chroma by id; "expansion": an expanded query's hit (only under a policy that
            # places them, e.g. EXPANDING_POLICY).
            print(f"  memory:   [{doc.id}] ({doc.metadata['gravity_slot']}) {doc.page_content[:80]}")

    def on_chat_model_start(self, serialized: Any, messages: list[list[BaseMessage]], **kwargs: Any) -> None:
        prompt = messages[0]
        print(f"  prompt:   {len(prompt)} messages (system with memories and anchors, history, question)")
        # The entity profiles GRAVITY put in the system message (one line per entity).
        system = str(prompt[0].content)
        profiles = system.partition("# Entity Profiles")[2].partition("</entity_profiles>")[0]
        for line in profiles.strip().splitlines()[:2]:
            print(f"  profile:  {line[:400]}")


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--conversation", type=Path, default=SAMPLE, help="JSONL/JSON turns or a LoCoMo file")
    parser.add_argument("--sample", help="LoCoMo sample id (e.g. conv-26) when --conversation is LoCoMo")
    parser.add_argument("--question", action="append", help="ask this instead (repeatable)")
    parser.add_argument("--workdir", type=Path, help="keep the KB and Chroma here (default: a temp folder)")
    args = parser.parse_args(argv)

    with tempfile.TemporaryDirectory(prefix="gravity-chat-") as tmp:
        workdir = args.workdir or Path(tmp)

        # 1. The long history, as utterances (speaker, text, session, timestamp).
        turns = load_conversation(args.conversation, sample=args.sample)
        print(f"history: {len(turns)} turns in {len({t.session for t in turns})} sessions")

        # 2. GRAVITY's anchors, built offline with the packaged MiniLM (building again adds nothing).
        embedder = MiniLMEmbedder()
        builder = AnchorBuilder(OfflineExtractor(embedder), embedder, store=AnchorStore(workdir / "kb"))
        report = builder.add(turns)
        print(
            f"KB: {report.added} turns added, {len(builder.kb.entities)} entities, "
            f"{len(builder.kb.events)} events, {len(builder.kb.topics)} topics"
        )
        engine = GravityEngine.from_dir(workdir / "kb", embedder=embedder)

        # 3. The host memory: a Chroma collection on disk, one document per turn.
        chroma = Chroma(
            collection_name="history",
            embedding_function=GravityEmbeddings(embedder),  # or OpenAIEmbeddings(), any Embeddings
            persist_directory=str(workdir / "chroma"),  # or client=chromadb.HttpClient(host=..., port=...)
        )
        chroma.add_documents(
            [Document(f"{t.speaker}: {t.text}", id=t.id, metadata={"session": t.session}) for t in turns]
        )

        # 4. The chain: GRAVITY's retrieval from Chroma, the anchors, the prompt, the model.
        questions = args.question or QUESTIONS
        answers = ANSWERS if not args.question else ["(a real model would answer here)"] * len(questions)
        llm = FakeListChatModel(responses=answers)  # real: llm = ChatOpenAI(model="gpt-4o-mini")
        chain = build_gravity_chain(engine, chroma, llm, k=4)

        # 5. The chat: the current conversation is passed as `history` (short-term memory), while
        #    Chroma and GRAVITY hold the long-term one.
        history: list[BaseMessage] = []
        show = ShowRetrieval()
        for question in questions:
            print(f"\nUser: {question}")
            answer = chain.invoke({"question": question, "history": history}, config={"callbacks": [show]})
            print(f"Bot:  {answer}")
            history += [HumanMessage(question), AIMessage(answer)]

        if args.workdir is None:
            chroma.delete_collection()  # release the files before the temp folder goes


if __name__ == "__main__":
    main()
