"""A stand-in for the OpenAI chat completions API on 127.0.0.1, so the OpenAI recipe runs offline.

``ChatOpenAI(base_url=server.url, api_key="fake")`` talks to it exactly as it talks to
api.openai.com: same client, same HTTP requests, same response parsing. Only the answers are
canned: :func:`recorded_answers` gives, for a GRAVITY extraction prompt, the recorded extractions of
the sessions its turns belong to, and for a question, its recorded answer.
"""

from __future__ import annotations

import json
import re
import threading
import time
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from gravity_core.text.tokens import TokenCounter

Answer = Callable[[list[dict[str, Any]]], str]
"""From the request's messages (``{"role", "content"}``) to the answer text."""

_CONVERSATION = re.compile(r"<CONVERSATION>\n(.*?)\n</CONVERSATION>", re.DOTALL)
_TURN_ID = re.compile(r"^\[(?P<id>(?P<session>[^\]:]+):[^\]]+)\]", re.MULTILINE)


class FakeOpenAI:
    """A local HTTP server answering ``POST /v1/chat/completions`` with ``answer(messages)``.

    Use it as a context manager; ``url`` is the ``base_url`` for ``ChatOpenAI`` and ``requests``
    holds the JSON body of every request received.
    """

    def __init__(self, answer: Answer) -> None:
        self.answer = answer
        self.requests: list[dict[str, Any]] = []
        self._counter = TokenCounter()
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self._server.server_port}/v1"

    def __enter__(self) -> FakeOpenAI:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._server.shutdown()
        self._server.server_close()

    def _completion(self, body: dict[str, Any]) -> tuple[int, dict[str, Any]]:
        self.requests.append(body)
        if body.get("stream"):
            return 400, {
                "error": {"message": "the fake server does not stream", "type": "invalid_request_error"}
            }
        messages = body.get("messages", [])
        try:
            text = self.answer(messages)
        except LookupError as exc:
            return 400, {"error": {"message": f"no recorded answer: {exc}", "type": "invalid_request_error"}}
        prompt_tokens = sum(self._counter.count(str(m.get("content", ""))) for m in messages)
        completion_tokens = self._counter.count(text)
        return 200, {
            "id": f"chatcmpl-fake-{len(self.requests)}",
            "object": "chat.completion",
            "created": int(time.time()),
            "model": body.get("model", "fake"),
            "choices": [
                {"index": 0, "message": {"role": "assistant", "content": text}, "finish_reason": "stop"}
            ],
            "usage": {
                "prompt_tokens": prompt_tokens,
                "completion_tokens": completion_tokens,
                "total_tokens": prompt_tokens + completion_tokens,
            },
        }

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        fake = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802 - the name http.server calls
                length = int(self.headers.get("Content-Length", 0))
                body = json.loads(self.rfile.read(length) or b"{}")
                if self.path.rstrip("/").endswith("/chat/completions"):
                    status, payload = fake._completion(body)
                else:
                    status, payload = (
                        404,
                        {"error": {"message": f"no route {self.path}", "type": "not_found"}},
                    )
                data = json.dumps(payload).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, format: str, *args: Any) -> None:  # quiet
                del format, args

        return Handler


def _within(item: Any, batch: set[str]) -> Any:
    """``item`` as a model that saw only ``batch`` would give it: ``None`` if it cites none of it.

    Every object with ``sources`` keeps those of the batch; lists keep the items that remain.
    """
    if isinstance(item, list):
        kept = [_within(value, batch) for value in item]
        return [value for value in kept if value is not None]
    if not isinstance(item, dict):
        return item
    if "sources" in item:
        sources = [s for s in item["sources"] if s in batch]
        if not sources:
            return None
        item = {**item, "sources": sources}
    return {key: _within(value, batch) for key, value in item.items()}


def recorded_answers(path: Path) -> Answer:
    """Answers from a recording: ``{"extractions": {session: json}, "answers": {question: text}}``.

    An extraction prompt (the fused prompt names ``FusedExtraction``) gets the recorded extractions
    of the sessions its turns belong to, joined, each item citing only turns of the prompt (a batch
    may hold the end of one session and the start of the next); any other request, the answer
    recorded for the text of its last user message. Anything else raises ``LookupError`` (the
    server answers 400).
    """
    recording = json.loads(path.read_text(encoding="utf-8"))

    def answer(messages: list[dict[str, Any]]) -> str:
        prompt = "\n".join(str(m.get("content", "")) for m in messages)
        conversation = _CONVERSATION.search(prompt)
        if "FusedExtraction" in prompt and conversation is not None:
            turns = list(_TURN_ID.finditer(conversation.group(1)))
            sessions = list(dict.fromkeys(turn.group("session") for turn in turns))
            if not sessions or any(s not in recording["extractions"] for s in sessions):
                raise LookupError("an extraction prompt of an unrecorded session")
            batch = {turn.group("id") for turn in turns}
            joined: dict[str, list[Any]] = {"entities": [], "events": [], "topics": []}
            for session in sessions:
                for key, items in recording["extractions"][session].items():
                    joined.setdefault(key, []).extend(_within(items, batch))
            return json.dumps(joined)
        question = next((str(m["content"]) for m in reversed(messages) if m.get("role") == "user"), "")
        if question not in recording["answers"]:
            raise LookupError(f"the question {question[:80]!r}")
        return str(recording["answers"][question])

    return answer
