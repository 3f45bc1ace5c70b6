"""The LLM path never shows a traceback (#19): every failure is a ProviderError or a failed batch.

Found by hostile testing: model exceptions that are not provider faults (``RuntimeError``, HTTP
400/401/404 from a real OpenAI client, a missing API key) escaped raw; an OpenAI structured answer
that was not JSON or was cut off stopped the build; an answer with a lone surrogate was stored and
broke every later run; ``None`` or ``bytes`` answers; a cache entry that is not UTF-8; a malformed
``recorded:FILE``; and a build that failed before its first save left a ``cache/`` folder behind.

Fakes stand in for the model and the network only: a scripted model, or the real OpenAI client
(through langchain-openai) against a local HTTP server.
"""

from __future__ import annotations

import json
import logging
import threading
from collections.abc import Callable, Iterator, Sequence
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from gravity_core.build.builder import AnchorBuilder
from gravity_core.cli import main
from gravity_core.embeddings import HashingEmbedder
from gravity_core.errors import InputDataError, ProviderError
from gravity_core.extract.llm import LLMExtractor
from gravity_core.llm.base import ChatModel, Message
from gravity_core.llm.cache import CachedModel, ResponseCache, cache_key
from gravity_core.llm.json_call import call_json
from gravity_core.llm.retry import RetryingChatModel, RetryPolicy
from gravity_core.prompts import FusedExtraction
from gravity_core.providers import load_chat_model
from gravity_core.storage.store import AnchorStore
from gravity_core.testing import FakeChatModel, recorded_model_from_file
from tests.reliability._build_helpers import batch_ids, conversation, good_answer

pytestmark = pytest.mark.loopback  # a fake provider or scheduler on 127.0.0.1

EMBEDDER = HashingEmbedder(dim=64)
HELLO: list[Message] = [{"role": "user", "content": "hello"}]
MODEL = "openai:gpt-4o-mini"


def builder(folder: Path, model: ChatModel) -> AnchorBuilder:
    store = AnchorStore(folder)
    extractor = LLMExtractor(model, fused=True, cache=ResponseCache(store.cache_dir))
    return AnchorBuilder(extractor, EMBEDDER, batch_size=4, store=store)


def no_sleep(_: float) -> None:
    pass


def run_cli(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str]:
    with pytest.raises(SystemExit) as info:
        main(argv)
        raise SystemExit(0)
    return int(info.value.code or 0), capsys.readouterr().err


def assert_one_error_line(err: str) -> str:
    """The one ``gravity: error:`` line of a failed command (a progress bar may precede it)."""
    assert "Traceback" not in err
    lines = [line for line in err.splitlines() if line.startswith("gravity: error:")]
    assert len(lines) == 1, err
    return lines[0]


def write_conversation(tmp_path: Path, sessions: int = 3) -> Path:
    path = tmp_path / "c.jsonl"
    path.write_text("\n".join(u.model_dump_json() for u in conversation(sessions=sessions)))
    return path


# -- a local server speaking OpenAI's chat-completions API ----------------------------------

Reply = tuple[int, bytes]


def completion(text: str, finish_reason: str = "stop") -> Reply:
    body = {
        "id": "chatcmpl-1",
        "object": "chat.completion",
        "created": 0,
        "model": "gpt-4o-mini",
        "choices": [
            {"index": 0, "message": {"role": "assistant", "content": text}, "finish_reason": finish_reason}
        ],
        "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2},
    }
    return 200, json.dumps(body).encode()


def api_error(status: int, message: str, code: str) -> Reply:
    body = {"error": {"message": message, "type": "invalid_request_error", "code": code}}
    return status, json.dumps(body).encode()


class FakeOpenAI:
    """Answers each request with ``reply(messages)``; records the requests' messages."""

    def __init__(self) -> None:
        self.reply: Callable[[list[Message]], Reply] = lambda messages: completion(good_answer(messages))
        self.requests: list[list[Message]] = []
        self.lock = threading.Lock()


@pytest.fixture
def fake_openai(monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[str, FakeOpenAI]]:
    pytest.importorskip("langchain_openai")
    state = FakeOpenAI()

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:  # noqa: N802 - http.server's name
            request = json.loads(self.rfile.read(int(self.headers.get("content-length", 0))))
            messages = [{"role": m["role"], "content": m["content"]} for m in request["messages"]]
            with state.lock:
                state.requests.append(messages)
            status, body = state.reply(messages)
            self.send_response(status)
            self.send_header("content-type", "application/json")
            self.send_header("content-length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    url = f"http://127.0.0.1:{server.server_address[1]}/v1"
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-not-a-key")
    monkeypatch.setenv("OPENAI_BASE_URL", url)
    monkeypatch.setenv("OPENAI_API_BASE", url)
    try:
        yield url, state
    finally:
        server.shutdown()
        server.server_close()


def openai_model(url: str, attempts: int = 3) -> RetryingChatModel:
    from langchain_openai import ChatOpenAI

    from gravity_langchain.models import LangChainChatModel

    chat = ChatOpenAI(model="gpt-4o-mini", base_url=url, api_key="sk-test", max_retries=0, timeout=5)  # type: ignore[arg-type]
    return RetryingChatModel(
        LangChainChatModel(chat, name=MODEL), RetryPolicy(max_attempts=attempts), sleep=no_sleep
    )


# -- model exceptions that are not provider faults ------------------------------------------


class Boom(Exception):
    """An exception of a model's own (not a provider fault)."""


MODEL_BUGS: list[BaseException] = [RuntimeError("model crashed"), ValueError("bad value"), Boom("kaput")]


@pytest.mark.parametrize("exc", MODEL_BUGS, ids=lambda e: type(e).__name__)
def test_a_models_own_exception_is_a_provider_error_raised_at_once(exc: BaseException) -> None:
    model = FakeChatModel([exc, "ok"], model_name="acme:m1")
    retrying = RetryingChatModel(model, RetryPolicy(max_attempts=5), sleep=no_sleep)
    with pytest.raises(ProviderError) as info:
        retrying.complete(HELLO)
    err = info.value
    assert err.__cause__ is exc and err.provider == "acme:m1" and err.retryable is False
    assert str(err).startswith(f"acme:m1: {type(exc).__name__}: {exc}")
    assert "check the model and its set-up" in str(err)
    assert len(model.calls) == 1, "not retried"


def test_call_json_turns_an_unwrapped_models_exception_into_a_provider_error() -> None:
    exc = RuntimeError("segfault in the local model")
    with pytest.raises(ProviderError, match=r"^local:7b: RuntimeError: segfault") as info:
        call_json(FakeChatModel([exc], model_name="local:7b"), HELLO, FusedExtraction)
    assert info.value.__cause__ is exc


def test_a_build_whose_model_raises_saves_what_it_did_and_stops_with_a_provider_error(tmp_path: Path) -> None:
    def crashes_on_session_2(messages: Sequence[Message]) -> str:
        if batch_ids(messages)[0] == "S2:1":
            raise RuntimeError("CUDA out of memory")
        return good_answer(messages)

    with pytest.raises(ProviderError, match="CUDA out of memory"):
        builder(tmp_path / "kb", FakeChatModel(crashes_on_session_2)).add(conversation())
    assert len(AnchorStore(tmp_path / "kb").load().kb.utterances) == 4, "the batch done first is saved"


@pytest.mark.parametrize(
    ("status", "code", "hint", "cause"),
    [
        (401, "invalid_api_key", "check the key", "AuthenticationError"),
        (403, "forbidden", "check the key's permissions", "PermissionDeniedError"),
        (404, "model_not_found", "check the model name", "NotFoundError"),
        (400, "invalid_request", "the provider refused the request", "BadRequestError"),
    ],
)
def test_openai_client_errors_are_provider_errors_naming_the_model_and_what_to_check(
    fake_openai: tuple[str, FakeOpenAI], status: int, code: str, hint: str, cause: str
) -> None:
    openai = pytest.importorskip("openai")
    url, server = fake_openai
    server.reply = lambda messages: api_error(status, f"refused ({code})", code)
    model = openai_model(url, attempts=4)
    for ask in (lambda: model.complete(HELLO), lambda: model.complete_structured(HELLO, FusedExtraction)):
        with pytest.raises(ProviderError) as info:
            ask()
        err = info.value
        assert str(err).startswith(f"{MODEL}: ") and hint in str(err) and f"({status})" in str(err)
        assert err.status_code == status and err.retryable is False
        assert isinstance(err.__cause__, getattr(openai, cause))
    assert len(server.requests) == 2, "raised at once, not retried"


def test_the_cli_reports_a_rejected_key_in_one_line(
    tmp_path: Path, fake_openai: tuple[str, FakeOpenAI], capsys: pytest.CaptureFixture[str]
) -> None:
    _, server = fake_openai
    server.reply = lambda messages: api_error(401, "Incorrect API key provided: sk-test", "invalid_api_key")
    convo = write_conversation(tmp_path)
    argv = ["build", str(convo), "-o", str(tmp_path / "kb"), "--embedder", "hashing"]
    code, err = run_cli([*argv, "--extractor", "llm", "--model", MODEL], capsys)
    line = assert_one_error_line(err)
    assert code == 1
    assert line.startswith(f"gravity: error: {MODEL}: ") and "Incorrect API key" in line
    assert "check the key (e.g. OPENAI_API_KEY)" in line
    assert len(server.requests) == 1


def test_the_cli_reports_an_unknown_model_in_one_line(
    tmp_path: Path, fake_openai: tuple[str, FakeOpenAI], capsys: pytest.CaptureFixture[str]
) -> None:
    _, server = fake_openai
    server.reply = lambda messages: api_error(404, "The model `gpt-9` does not exist", "model_not_found")
    convo = write_conversation(tmp_path)
    argv = ["build", str(convo), "-o", str(tmp_path / "kb"), "--embedder", "hashing", "--extractor", "llm"]
    code, err = run_cli([*argv, "--model", "openai:gpt-9"], capsys)
    line = assert_one_error_line(err)
    assert code == 1 and line.startswith("gravity: error: openai:gpt-9: ") and "check the model name" in line


def test_a_missing_api_key_is_one_line_naming_the_model(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    pytest.importorskip("langchain_openai")
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    with pytest.raises(ProviderError, match=rf"^{MODEL}: cannot create the model: .*OPENAI_API_KEY") as info:
        load_chat_model(MODEL)
    assert info.value.retryable is False and info.value.__cause__ is not None
    convo = write_conversation(tmp_path)
    argv = ["build", str(convo), "-o", str(tmp_path / "kb"), "--embedder", "hashing", "--extractor", "llm"]
    code, err = run_cli([*argv, "--model", MODEL], capsys)
    line = assert_one_error_line(err)
    assert code == 1 and line.startswith(f"gravity: error: {MODEL}: cannot create the model")
    assert not (tmp_path / "kb").exists()


def test_langchain_and_llamaindex_adapters_wrap_a_models_own_exception() -> None:
    pytest.importorskip("llama_index.core")
    from langchain_core.language_models.fake_chat_models import FakeListChatModel
    from llama_index.core.llms import MockLLM

    from gravity_langchain.models import LangChainChatModel
    from gravity_llamaindex.models import LlamaIndexChatModel

    class CrashingChat(FakeListChatModel):
        def _call(self, *args: Any, **kwargs: Any) -> str:
            raise ValueError("tokenizer exploded")

    class CrashingLLM(MockLLM):
        def complete(self, *args: Any, **kwargs: Any) -> Any:
            raise RuntimeError("weights missing")

    for adapter, message in (
        (LangChainChatModel(CrashingChat(responses=["x"]), name="lc:fake"), "tokenizer exploded"),
        (LlamaIndexChatModel(CrashingLLM(), name="li:mock"), "weights missing"),
    ):
        with pytest.raises(ProviderError, match=message) as info:
            adapter.complete(HELLO)
        assert info.value.provider == adapter.model_name and info.value.retryable is False
        assert isinstance(info.value.__cause__, ValueError | RuntimeError)


# -- bad answers through OpenAI structured output -------------------------------------------

BAD_STRUCTURED = {
    "not_json": (lambda: completion("not json at all"), "not json at all", "no JSON object"),
    "cut_off": (
        lambda: completion('{"entities": [{"name": "Ma', finish_reason="length"),
        '{"entities": [{"name": "Ma',
        "incomplete, as if cut off",
    ),
}


@pytest.mark.parametrize("kind", sorted(BAD_STRUCTURED))
def test_an_unreadable_structured_answer_is_a_failed_batch_and_the_build_goes_on(
    tmp_path: Path, fake_openai: tuple[str, FakeOpenAI], kind: str
) -> None:
    url, server = fake_openai
    bad, raw, told = BAD_STRUCTURED[kind]
    server.reply = lambda m: bad() if batch_ids(m)[0] == "S2:1" else completion(good_answer(m))
    report = builder(tmp_path / "kb", openai_model(url)).add(conversation())
    assert report.failed_batches == 1 and report.batches == 3
    kb = AnchorStore(tmp_path / "kb").load().kb
    [failed] = kb.build.failed_batches
    assert failed.utterance_ids == ["S2:1", "S2:2", "S2:3", "S2:4"]
    assert failed.raw_output == raw and told in failed.reason and "after 3 attempt(s)" in failed.reason
    reasks = [r for r in server.requests if batch_ids(r)[0] == "S2:1"]
    assert len(reasks) == 3 and told in reasks[1][-1]["content"], "re-asked with the reason"
    assert {e.sources[0].split(":")[0] for e in kb.events.values()} == {"S1", "S3"}


def test_the_cli_records_an_unreadable_structured_answer_and_exits_0(
    tmp_path: Path, fake_openai: tuple[str, FakeOpenAI], capsys: pytest.CaptureFixture[str]
) -> None:
    _, server = fake_openai
    server.reply = lambda m: (
        completion("not json at all") if batch_ids(m)[0] == "S2:1" else completion(good_answer(m))
    )
    convo = write_conversation(tmp_path)
    argv = ["build", str(convo), "-o", str(tmp_path / "kb"), "--embedder", "hashing", "--batch-size", "4"]
    code, err = run_cli([*argv, "--extractor", "llm", "--model", MODEL], capsys)
    assert code == 0 and "Traceback" not in err, err
    assert "1 failed batch(es) in the build log" in err


# -- answers that cannot be stored as they are ----------------------------------------------


@pytest.mark.parametrize("spelling", ["json_escape", "raw_character"])
def test_a_lone_surrogate_in_an_answer_is_replaced_before_it_is_stored_or_cached(
    tmp_path: Path, spelling: str
) -> None:
    surrogate = "\\ud800" if spelling == "json_escape" else "\ud800"

    def answer(messages: Sequence[Message]) -> str:
        # A control character too: only newlines and tabs are kept.
        return good_answer(messages).replace('"Maya"', f'"Maya{surrogate}\\u0007\x1b"')

    folder = tmp_path / "kb"
    builder(folder, FakeChatModel(answer)).add(conversation(sessions=2))
    # The next run reads the KB back, lists its entities in the prompts and hashes them: no crash.
    more = FakeChatModel(answer)
    builder(folder, more).add(conversation(sessions=3))
    assert len(more.calls) == 1
    kb = AnchorStore(folder).load().kb
    names = {e.name for e in kb.entities.values()}
    assert "Maya\ufffd" in names, names
    text = json.dumps(kb.to_dict(), ensure_ascii=False)
    text.encode("utf-8")  # every string is valid UTF-8
    assert "\x1b" not in text and "\x07" not in text
    entries = list((folder / "cache").rglob("*.json"))
    assert entries and all(json.loads(p.read_bytes().decode("utf-8"))["completion"] for p in entries)


def test_answers_of_none_or_bytes_are_read_as_text(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    def answer(messages: Sequence[Message]) -> Any:
        session = batch_ids(messages)[0].split(":")[0]
        if session == "S1":
            return good_answer(messages).encode("utf-8")  # bytes of a good answer: used
        if session == "S2":
            return None  # no text at all: an empty answer
        return good_answer(messages)

    with caplog.at_level(logging.WARNING):
        report = builder(tmp_path / "kb", FakeChatModel(answer)).add(conversation())
    assert report.failed_batches == 1
    [failed] = AnchorStore(tmp_path / "kb").load().kb.build.failed_batches
    assert failed.utterance_ids[0] == "S2:1" and "The answer is empty" in failed.reason
    assert "answered with bytes instead of text" in caplog.text
    assert "answered with NoneType instead of text" in caplog.text
    cached = CachedModel(FakeChatModel([None, b"\xffok"]), ResponseCache(tmp_path / "c"))  # type: ignore[list-item]
    assert cached.complete(HELLO) == "" and cached.complete([*HELLO, *HELLO]) == "\ufffdok"


def test_a_cache_entry_that_is_not_utf8_is_a_logged_miss(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    cache = ResponseCache(tmp_path / "cache")
    cache.put("m", HELLO, '{"ok": 1}')
    path = cache.path_for("m", HELLO)
    path.write_bytes(b'{"model": "m", "completion": "\xff\xfe broken"}')
    with caplog.at_level(logging.WARNING):
        assert cache.get("m", HELLO) is None
    assert "unreadable, treating it as a miss" in caplog.text
    model = FakeChatModel(['{"ok": 2}'], model_name="m")
    assert CachedModel(model, cache).complete(HELLO) == '{"ok": 2}' and len(model.calls) == 1
    assert cache.get("m", HELLO) == '{"ok": 2}', "the bad entry is overwritten"


def test_cache_keys_and_entries_survive_text_utf8_cannot_encode(tmp_path: Path) -> None:
    odd: list[Message] = [{"role": "user", "content": "known entity: Maya\udc80"}]
    assert len(cache_key("m", odd)) == 64
    cache = ResponseCache(tmp_path / "cache")
    cache.put("m", odd, "answer \ud800")
    assert cache.get("m", odd) == "answer \ufffd"


# -- a malformed recorded:FILE --------------------------------------------------------------

MALFORMED = {
    "answer_int": ([{"match": ["FusedExtraction"], "answer": 5}], "record #1, field 'answer'", "got int 5"),
    "match_ints": ([{"match": [1, 2], "answer": "x"}], "record #1, field 'match'", "got list [1, 2]"),
    "second_record": (
        [{"match": ["a"], "answer": "x"}, {"match": ["b"], "answer": [None]}],
        "record #2, field 'answer'",
        "got list [null]",
    ),
    "no_answer": ([{"match": ["a"]}], "record #1, field 'answer'", "is missing"),
    "not_a_list": ({"match": ["a"], "answer": "x"}, "expected a list", "got dict"),
    "not_an_object": (["x"], "record #1", "expected an object"),
}


@pytest.mark.parametrize("kind", sorted(MALFORMED))
def test_a_malformed_recorded_file_is_one_input_data_error_naming_file_record_and_field(
    tmp_path: Path, kind: str, capsys: pytest.CaptureFixture[str]
) -> None:
    content, where, what = MALFORMED[kind]
    answers = tmp_path / "answers.json"
    answers.write_text(json.dumps(content))
    with pytest.raises(InputDataError) as info:
        recorded_model_from_file(str(answers))
    assert (
        str(info.value).startswith(f"file {answers}") and where in str(info.value) and what in str(info.value)
    )
    convo = write_conversation(tmp_path)
    argv = ["build", str(convo), "-o", str(tmp_path / "kb"), "--embedder", "hashing", "--extractor", "llm"]
    code, err = run_cli([*argv, "--model", f"recorded:{answers}"], capsys)
    line = assert_one_error_line(err)
    assert code == 1 and where in line and str(answers) in line
    assert not (tmp_path / "kb").exists()


# -- a failed first build leaves the output folder as it was --------------------------------


@pytest.mark.parametrize("before", ["absent", "empty", "absent_parent"])
def test_a_build_that_fails_before_its_first_save_leaves_the_folder_as_it_was(
    tmp_path: Path, before: str, capsys: pytest.CaptureFixture[str]
) -> None:
    answers = tmp_path / "answers.json"
    answers.write_text(json.dumps([{"match": ["no prompt contains this"], "answer": "x"}]))
    kb = tmp_path / "new" / "kb" if before == "absent_parent" else tmp_path / "kb"
    if before == "empty":
        kb.mkdir()
    convo = write_conversation(tmp_path)
    argv = ["build", str(convo), "-o", str(kb), "--embedder", "hashing", "--extractor", "llm"]
    code, err = run_cli([*argv, "--model", f"recorded:{answers}"], capsys)
    assert code == 1 and "no recorded key matches" in assert_one_error_line(err)
    if before == "empty":
        assert kb.is_dir() and list(kb.iterdir()) == []
    else:
        assert not kb.exists() and not (tmp_path / "new").exists()


def test_a_provider_failing_on_the_first_batch_leaves_no_folder(tmp_path: Path) -> None:
    model = RetryingChatModel(
        FakeChatModel([ConnectionResetError("reset")] * 3, model_name="acme:m1"),
        RetryPolicy(max_attempts=3),
        sleep=no_sleep,
    )
    with pytest.raises(ProviderError, match="gave up after 3 attempt"):
        builder(tmp_path / "kb", model).add(conversation())
    assert not (tmp_path / "kb").exists()


def test_the_response_cache_makes_its_folder_on_the_first_put(tmp_path: Path) -> None:
    cache = ResponseCache(tmp_path / "kb" / "cache")
    assert cache.get("m", HELLO) is None and not (tmp_path / "kb").exists()
    cache.put("m", HELLO, "hi")
    assert cache.get("m", HELLO) == "hi"
