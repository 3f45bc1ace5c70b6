"""A chat service for many users, one of whom asks to be forgotten.

One LangChain chain (``build_gravity_chain(None, store, model, users=..., user_filter=...)``) serves
every user: each call names its user in ``config={"configurable": {"user_id": ...}}``, and gets that
user's anchors (their own KB folder under a ``UserKBs`` root) and only their turns of the shared
Chroma store (the ``user_filter``). Two users: Maya, with the sessions of
examples/sample_conversation.jsonl, and Lou, with a short chat of their own. Then:

1. both ask a question: each prompt holds only that user's memories;
2. Maya asks GRAVITY to forget her second session: ``UserKBs.forget`` removes it from her KB (what
   her KB knew only from it goes, what it also knew from other sessions stays) and the app deletes
   the same turns from its own store; the words of that session are then in no prompt and in no
   file of her KB folder;
3. Maya closes her account: ``UserKBs.delete`` removes her folder, the app deletes her turns, and her
   next call gets no memories at all, while Lou's are untouched.

The chat model is an offline stand-in (``FakeListChatModel``); what is printed is what GRAVITY put
in its prompt. Run from anywhere (offline, about a minute):

    python cookbook/multi_user_chat_app.py
    python cookbook/multi_user_chat_app.py --workdir /tmp/users   # keep the KBs to inspect them
"""

from __future__ import annotations

import argparse
import logging
import tempfile
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import chromadb
from langchain_chroma import Chroma
from langchain_core.callbacks import BaseCallbackHandler
from langchain_core.documents import Document
from langchain_core.language_models.fake_chat_models import FakeListChatModel
from langchain_core.messages import BaseMessage

from gravity_core.embeddings import MiniLMEmbedder
from gravity_core.loaders import load_conversation
from gravity_core.schema import Utterance
from gravity_core.serving.users import UserKBs
from gravity_langchain import GravityEmbeddings, build_gravity_chain

SAMPLE = Path(__file__).resolve().parents[1] / "examples" / "sample_conversation.jsonl"
QUESTION = "What happened at the vet, and who came along?"


def lou_chat() -> list[Utterance]:
    """Lou's own short chat with the assistant."""
    start = datetime(2024, 4, 2, 9, 0, tzinfo=UTC)
    lines = [
        ("Lou", "Morning! I finally took my cat Pixel to the vet yesterday; my brother Sam drove us."),
        ("Assistant", "How did Pixel do at the vet?"),
        ("Lou", "The vet said Pixel needs a dental cleaning in May, so I booked it for the 14th."),
        ("Assistant", "Good that it is booked. Anything else this week?"),
        ("Lou", "I started a pottery class on Thursdays at the community centre in Leith."),
    ]
    return [
        Utterance(
            id=f"lou:{i}", speaker=who, text=text, session="session_1", timestamp=start + timedelta(minutes=i)
        )
        for i, (who, text) in enumerate(lines, start=1)
    ]


class PromptSeen(BaseCallbackHandler):
    """The system prompt the chat model got."""

    def __init__(self) -> None:
        self.system = ""

    def on_chat_model_start(self, serialized: Any, messages: list[list[BaseMessage]], **kwargs: Any) -> None:
        self.system = str(messages[0][0].content)


def documents(user: str, turns: list[Utterance]) -> list[Document]:
    """The app's own memories of a user: one document per turn, tagged with the user and session."""
    return [
        Document(
            f"{t.speaker}: {t.text}", id=f"{user}/{t.id}", metadata={"user_id": user, "session": t.session}
        )
        for t in turns
    ]


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--workdir", type=Path, help="keep the KBs and the store here (default: a temp folder)"
    )
    args = parser.parse_args(argv)

    with tempfile.TemporaryDirectory(prefix="gravity-users-") as tmp:
        work = args.workdir or Path(tmp)
        work.mkdir(parents=True, exist_ok=True)
        embedder = MiniLMEmbedder()
        users = UserKBs(work / "kbs", embedder=embedder)  # kbs/<user id>/ is each user's KB folder
        chats = {"maya": load_conversation(SAMPLE), "lou": lou_chat()}

        # One Chroma collection holds every user's turns; the user_filter keeps each search to one user.
        client = chromadb.PersistentClient(path=str(work / "chroma"))
        store = Chroma("turns", GravityEmbeddings(embedder), client=client)
        for user, turns in chats.items():
            users.add(user, turns)
            store.add_documents(documents(user, turns))
            print(f"{user}: {len(turns)} turns in the store, KB in {users.folder(user).name}/")

        llm = FakeListChatModel(responses=["(the model's answer)"])  # real: ChatOpenAI(model="gpt-4o-mini")
        chain = build_gravity_chain(
            None, store, llm, k=4, users=users, user_filter=lambda user: {"filter": {"user_id": user}}
        )

        def ask(user: str) -> str:
            seen = PromptSeen()
            chain.invoke(QUESTION, config={"callbacks": [seen], "configurable": {"user_id": user}})
            return seen.system

        def show(user: str, prompt: str, watch: tuple[str, ...]) -> None:
            found = [word for word in watch if word in prompt]
            anchors = prompt.count("\n- ")
            print(f"  {user}: {anchors} anchor and memory lines in the prompt; of {list(watch)}: {found}")

        watch = ("Biscuit", "Northwind", "Pixel", "Leith")
        print(f"\n1. Both ask: {QUESTION!r}")
        for user in chats:
            show(user, ask(user), watch)

        # 2. Maya asks to forget her second session: GRAVITY's KB, then the app's own store.
        second = [t for t in chats["maya"] if t.session == "session_2"]
        report = users.forget("maya", sessions=["session_2"])
        store.delete(ids=[d.id for d in documents("maya", second) if d.id is not None])
        print(
            f"\n2. maya forgets session_2: {report.forgotten} turns; anchors {report.before} -> {report.after}"
        )
        prompt = ask("maya")
        files = [p.read_bytes() for p in users.folder("maya").rglob("*") if p.is_file()]
        in_prompt = [t.id for t in second if t.text[:40] in prompt]
        on_disk = [t.id for t in second if any(t.text[:40].encode() in data for data in files)]
        print(
            f"  of the {len(second)} forgotten turns, in maya's next prompt: {in_prompt}; in her KB: {on_disk}"
        )

        # 3. Maya closes her account.
        users.delete("maya")
        store.delete(ids=[d.id for d in documents("maya", chats["maya"]) if d.id is not None])
        print(f"\n3. maya's account closed: users with a KB now {users.users()}")
        show("maya", ask("maya"), watch)
        show("lou", ask("lou"), watch)


if __name__ == "__main__":
    logging.basicConfig(level=logging.WARNING)
    main()
