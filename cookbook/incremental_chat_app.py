"""A running chat app that adds each finished session to GRAVITY's KB, without rebuilding it.

The app keeps two memories of its user, Maya:

- the host memory, a LangChain vector store: every message goes in as soon as it is said;
- GRAVITY's KB: when a session ends, its messages are added in one ``AnchorBuilder.add``. Turns
  already in the KB are skipped, so the KB grows by the new session only and is never rebuilt.

Each of Maya's messages is answered by ``build_gravity_chain`` over both memories (the anchors come
from the sessions finished so far). The sessions are those of examples/sample_conversation.jsonl:
Maya's lines are the user's, and the fake chat model replays the recorded replies (Jonas's lines),
so the conversation unfolds as recorded; a real model would write its own. The app starts with
session 1 already in memory, then lives through sessions 2 to 6.

Run from anywhere (offline, about 15 s):

    python cookbook/incremental_chat_app.py
    python cookbook/incremental_chat_app.py --workdir /tmp/chat-app   # keep the KB to inspect it
"""

from __future__ import annotations

import argparse
import tempfile
import time
from itertools import groupby
from pathlib import Path
from typing import Any

from langchain_core.callbacks import BaseCallbackHandler
from langchain_core.documents import Document
from langchain_core.language_models.fake_chat_models import FakeListChatModel
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage
from langchain_core.vectorstores import InMemoryVectorStore

from gravity_core.build import AnchorBuilder
from gravity_core.embeddings import MiniLMEmbedder
from gravity_core.extract.offline import OfflineExtractor
from gravity_core.loaders import load_conversation
from gravity_core.query.engine import GravityEngine
from gravity_core.schema import Utterance
from gravity_core.storage.store import AnchorStore
from gravity_langchain import ANCHORS_EVENT, GravityEmbeddings, build_gravity_chain, utterances_from_messages

SAMPLE = Path(__file__).resolve().parents[1] / "examples" / "sample_conversation.jsonl"
USER = "Maya"


def as_message(turn: Utterance, text: str | None = None) -> BaseMessage:
    """A chat message as the app stores it: speaker name, id, session and time travel with it."""
    kind = HumanMessage if turn.speaker == USER else AIMessage
    extra = {"timestamp": turn.timestamp.isoformat(), "session": turn.session}
    return kind(
        text if text is not None else turn.text, name=turn.speaker, id=turn.id, additional_kwargs=extra
    )


class AnchorsSeen(BaseCallbackHandler):
    """Collects the anchors GRAVITY selected for each message."""

    def __init__(self) -> None:
        self.selections: list[list[str]] = []

    def on_custom_event(self, name: str, data: Any, **kwargs: Any) -> None:
        if name == ANCHORS_EVENT:
            self.selections.append([f"{a['kind']} {a['id']}" for a in data["anchors"]])


def exchanges(turns: list[Utterance]) -> list[tuple[Utterance | None, Utterance | None]]:
    """A session as (user message, the bot's reply) pairs; a bot line no user line precedes opens alone."""
    pairs: list[tuple[Utterance | None, Utterance | None]] = []
    for turn in turns:
        if turn.speaker == USER:
            pairs.append((turn, None))
        elif pairs and pairs[-1][0] is not None and pairs[-1][1] is None:
            pairs[-1] = (pairs[-1][0], turn)
        else:
            pairs.append((None, turn))
    return pairs


def counts(builder: AnchorBuilder) -> dict[str, int]:
    kb = builder.kb
    return {
        "turns": len(kb.utterances),
        "entities": len(kb.entities),
        "events": len(kb.events),
        "topics": len(kb.topics),
    }


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--workdir", type=Path, help="keep the KB here (default: a temp folder)")
    args = parser.parse_args(argv)

    with tempfile.TemporaryDirectory(prefix="gravity-app-") as tmp:
        kb_dir = (args.workdir or Path(tmp)) / "kb"
        sessions = [list(turns) for _, turns in groupby(load_conversation(SAMPLE), key=lambda t: t.session)]

        # The app's memories. The builder lives as long as the app and saves the KB after each add.
        embedder = MiniLMEmbedder()
        builder = AnchorBuilder(OfflineExtractor(embedder), embedder, store=AnchorStore(kb_dir))
        host = InMemoryVectorStore(GravityEmbeddings(embedder))
        log: list[BaseMessage] = []  # every message of every session, as the app stores them
        chat: list[BaseMessage] = []  # the current session's messages

        def remember(message: BaseMessage) -> None:
            log.append(message)
            host.add_documents([Document(f"{message.name}: {message.text}", id=message.id)])

        def say(message: BaseMessage) -> None:
            chat.append(message)
            remember(message)

        # Session 1 happened before today's run: it is in both memories already. (An app starting
        # from nothing works too: an engine over an empty KB adds no anchors until the first add.)
        for turn in sessions[0]:
            remember(as_message(turn))
        builder.add(utterances_from_messages(log))
        print(f"at start: {counts(builder)}")

        for turns in sessions[1:]:
            session = turns[0].session
            # The engine reads the KB as it is now: rebuilt from the builder after each add (cheap).
            engine = GravityEngine.from_builder(builder)
            pairs = exchanges(turns)
            # The fake replays the recorded reply to each user message (or "" if none followed).
            replies = [bot.text if bot is not None else "" for user, bot in pairs if user is not None]
            llm = FakeListChatModel(responses=replies)  # real: llm = ChatOpenAI(model="gpt-4o-mini")
            chain = build_gravity_chain(engine, host, llm, k=4)
            seen = AnchorsSeen()

            # The chat: each user message is answered with the long-term memory and the session so far.
            chat.clear()
            for user, bot in pairs:
                if user is None and bot is not None:
                    say(as_message(bot))  # the bot opens the session
                elif user is not None:
                    question = {"question": user.text, "history": chat}
                    reply = chain.invoke(question, config={"callbacks": [seen]})
                    say(as_message(user))
                    if bot is not None:
                        say(as_message(bot, text=reply))  # stored with the recorded turn's id and time
            answered = sum(1 for user, _ in pairs if user is not None)
            first = turns[0] if turns[0].speaker == USER else turns[1]
            print(f"\n{session} ({turns[0].timestamp.date()}): {answered} user messages answered")
            print(f"  e.g. {first.speaker}: {first.text[:60]!r}")
            print(f"    anchors from earlier sessions: {seen.selections[0][:5]}")

            # The session is over: add its messages to the KB. Only the new turns are extracted.
            before = counts(builder)
            started = time.perf_counter()
            report = builder.add(utterances_from_messages(chat))
            after = counts(builder)
            growth = ", ".join(f"{k} {after[k]} (+{after[k] - before[k]})" for k in after)
            print(
                f"  KB add: {report.added} new turns, {report.skipped} skipped, "
                f"{time.perf_counter() - started:.2f} s -> {growth}"
            )

        # No rebuild needed: the whole history again adds nothing, in this process or a new one.
        history = utterances_from_messages(log)
        again = builder.add(history)
        reopened = AnchorBuilder(OfflineExtractor(embedder), embedder, store=AnchorStore(kb_dir)).add(history)
        print(
            f"\nwhole history again: {again.added} added, {again.skipped} skipped; "
            f"after a restart: {reopened.added} added, {reopened.skipped} skipped"
        )

        # For comparison, everything built at once gives the same KB.
        at_once = AnchorBuilder(OfflineExtractor(embedder), embedder)
        at_once.add(history)
        print(f"incremental KB: {counts(builder)}\nbuilt at once:  {counts(at_once)}")


if __name__ == "__main__":
    main()
