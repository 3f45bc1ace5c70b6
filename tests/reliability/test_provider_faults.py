"""Provider faults: backoff with full jitter and a cap, typed errors after exhaustion, concurrency limit.

Unit tests script the faults with a fake model and record the waits instead of sleeping. The
integration tests send real requests through ``ChatOpenAI`` (max_retries=0) to a local HTTP server
that answers 429 with ``Retry-After``, stalls past the client's timeout, or is not there at all.
"""

from __future__ import annotations

import json
import random
import socket
import threading
import time
from collections.abc import Iterator, Sequence
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from types import SimpleNamespace

import pytest

from gravity_core.build.builder import AnchorBuilder
from gravity_core.embeddings import HashingEmbedder
from gravity_core.errors import ConfigurationError, ProviderError
from gravity_core.extract.llm import LLMExtractor
from gravity_core.llm.base import ChatModel, Message
from gravity_core.llm.cache import ResponseCache
from gravity_core.llm.retry import ConcurrencyLimiter, RetryingChatModel, RetryPolicy, is_retryable
from gravity_core.providers import load_chat_model
from gravity_core.schema import KnowledgeBase
from gravity_core.storage.store import AnchorStore
from gravity_core.testing import FakeChatModel
from tests.reliability._build_helpers import batch_ids, comparable, conversation, good_answer

pytestmark = pytest.mark.loopback  # a fake provider or scheduler on 127.0.0.1

HELLO: list[Message] = [{"role": "user", "content": "hello"}]


class Http(Exception):
    """An SDK-style HTTP error: ``status_code`` and a ``response`` with headers."""

    def __init__(self, status: int, headers: dict[str, str] | None = None) -> None:
        super().__init__(f"HTTP {status}")
        self.status_code = status
        self.response = SimpleNamespace(status_code=status, headers=headers or {})


class RateLimitError(Exception):
    """Named like openai's: recognized by class name, no status attribute."""


def flaky(faults: Sequence[BaseException], name: str = "acme:m1") -> FakeChatModel:
    """Raises the scripted faults in turn, then answers "ok"."""
    return FakeChatModel([*faults, "ok"], model_name=name)


class Clock:
    """A fake monotonic clock that the recorded sleeps advance."""

    def __init__(self) -> None:
        self.now = 0.0
        self.sleeps: list[float] = []

    def __call__(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.sleeps.append(seconds)
        self.now += seconds


def wrapped(
    model: FakeChatModel, policy: RetryPolicy, clock: Clock, rng: float | None = None
) -> RetryingChatModel:
    draw = (lambda: rng) if rng is not None else random.Random(7).random
    return RetryingChatModel(model, policy, sleep=clock.sleep, clock=clock, rng=draw)


# -- classification -------------------------------------------------------------------------


def _openai_faults() -> list[tuple[str, BaseException, bool]]:
    openai = pytest.importorskip("openai")
    httpx = pytest.importorskip("httpx")
    request = httpx.Request("POST", "https://api.example/v1/chat/completions")

    def status(cls: type[BaseException], code: int) -> BaseException:
        return cls("boom", response=httpx.Response(code, request=request), body=None)  # type: ignore[call-arg]

    return [
        ("openai.RateLimitError", status(openai.RateLimitError, 429), True),
        ("openai.InternalServerError", status(openai.InternalServerError, 503), True),
        ("openai.APITimeoutError", openai.APITimeoutError(request=request), True),
        ("openai.APIConnectionError", openai.APIConnectionError(request=request), True),
        ("openai.BadRequestError", status(openai.BadRequestError, 400), False),
        ("openai.AuthenticationError", status(openai.AuthenticationError, 401), False),
        ("httpx.ReadTimeout", httpx.ReadTimeout("slow", request=request), True),
        ("httpx.ConnectError", httpx.ConnectError("refused", request=request), True),
    ]


FAULTS: list[tuple[str, BaseException, bool]] = [
    ("429", Http(429), True),
    ("408", Http(408), True),
    ("500", Http(500), True),
    ("502", Http(502), True),
    ("503", Http(503), True),
    ("400", Http(400), False),
    ("401", Http(401), False),
    ("404", Http(404), False),
    ("RateLimitError by name", RateLimitError("slow down"), True),
    ("TimeoutError", TimeoutError("timed out"), True),
    ("ConnectionResetError", ConnectionResetError("reset by peer"), True),
    ("ProviderError without status", ProviderError("connection reset", provider="acme"), True),
    ("ProviderError 503", ProviderError("unavailable", provider="acme", status_code=503), True),
    ("ProviderError 401", ProviderError("bad key", provider="acme", status_code=401), False),
    ("ValueError (a bug)", ValueError("bug"), False),
]


@pytest.mark.parametrize(("name", "exc", "transient"), FAULTS, ids=[f[0] for f in FAULTS])
def test_transient_faults_are_retried_and_others_raised_at_once(
    name: str, exc: BaseException, transient: bool
) -> None:
    clock = Clock()
    model = flaky([exc, exc])
    retrying = wrapped(model, RetryPolicy(max_attempts=5), clock)
    assert is_retryable(exc) is transient
    if transient:
        assert retrying.complete(HELLO) == "ok"
        assert len(model.calls) == 3 and len(clock.sleeps) == 2 and retrying.retries == 2
    else:
        # Raised at once, as a ProviderError naming the model, the original chained (#19).
        with pytest.raises(ProviderError) as info:
            retrying.complete(HELLO)
        assert info.value is exc if isinstance(exc, ProviderError) else info.value.__cause__ is exc
        assert info.value.provider == ("acme" if isinstance(exc, ProviderError) else "acme:m1")
        assert len(model.calls) == 1 and clock.sleeps == []


def test_real_sdk_exceptions_are_classified() -> None:
    for name, exc, transient in _openai_faults():
        assert is_retryable(exc) is transient, name


# -- backoff --------------------------------------------------------------------------------


def test_backoff_bounds_grow_exponentially_up_to_the_cap() -> None:
    clock = Clock()
    policy = RetryPolicy(max_attempts=8, initial_delay=0.5, multiplier=2.0, max_delay=6.0, deadline=None)
    retrying = wrapped(flaky([Http(429)] * 7), policy, clock, rng=0.999999)
    assert retrying.complete(HELLO) == "ok"
    assert clock.sleeps == pytest.approx([0.5, 1.0, 2.0, 4.0, 6.0, 6.0, 6.0], rel=1e-5)


def test_waits_are_jittered_uniformly_below_each_bound() -> None:
    clock = Clock()
    policy = RetryPolicy(max_attempts=400, initial_delay=1.0, multiplier=2.0, max_delay=8.0, deadline=None)
    retrying = wrapped(flaky([Http(503)] * 399), policy, clock)
    assert retrying.complete(HELLO) == "ok"
    bounds = [policy.bound(n) for n in range(1, 400)]
    assert all(0.0 <= wait <= bound for wait, bound in zip(clock.sleeps, bounds, strict=True))
    capped = clock.sleeps[10:]
    assert len(set(capped)) == len(capped), "every wait is drawn anew"
    assert 0.4 < sum(capped) / len(capped) / 8.0 < 0.6, "full jitter: mean near half the cap"
    assert min(capped) < 1.0 and max(capped) > 7.0


def test_retry_after_is_honoured_up_to_the_cap() -> None:
    clock = Clock()
    policy = RetryPolicy(max_attempts=4, initial_delay=0.1, max_delay=20.0)
    faults = [
        Http(429, {"retry-after": "7"}),
        Http(429, {"retry-after-ms": "1500"}),
        Http(429, {"retry-after": "90"}),
    ]
    retrying = wrapped(flaky(faults), policy, clock, rng=0.0)
    assert retrying.complete(HELLO) == "ok"
    assert clock.sleeps == [7.0, 1.5, 20.0]


def test_exhausted_retries_raise_provider_error_naming_the_model() -> None:
    clock = Clock()
    model = flaky([Http(429)] * 10, name="openai:gpt-4o-mini")
    retrying = wrapped(model, RetryPolicy(max_attempts=4, initial_delay=1.0, max_delay=2.0), clock)
    with pytest.raises(ProviderError) as info:
        retrying.complete(HELLO)
    err = info.value
    assert err.provider == "openai:gpt-4o-mini" and err.status_code == 429
    assert str(err).startswith("openai:gpt-4o-mini: gave up after 4 attempt(s)") and "Http (429)" in str(err)
    assert isinstance(err.__cause__, Http)
    assert len(model.calls) == 4 and len(clock.sleeps) == 3 and sum(clock.sleeps) <= 1.0 + 2.0 + 2.0


def test_the_deadline_stops_retrying_before_the_attempts_run_out() -> None:
    clock = Clock()
    model = flaky([TimeoutError("timed out")] * 100)
    policy = RetryPolicy(max_attempts=100, initial_delay=4.0, max_delay=4.0, deadline=30.0)
    with pytest.raises(ProviderError, match=r"gave up after \d+ attempt\(s\) in 30\.0 s: TimeoutError"):
        wrapped(model, policy, clock, rng=0.999999).complete(HELLO)
    assert clock.now == pytest.approx(30.0) and len(model.calls) == 9


def test_bad_policies_are_refused() -> None:
    for kwargs in ({"max_attempts": 0}, {"initial_delay": -1}, {"multiplier": 0.5}, {"deadline": 0}):
        with pytest.raises(ConfigurationError):
            RetryPolicy(**kwargs)
    with pytest.raises(ConfigurationError):
        ConcurrencyLimiter(0)


# -- concurrency ----------------------------------------------------------------------------


class Gauge:
    """A model that records how many requests are in flight at once."""

    def __init__(self, name: str = "gauge", fail_first: bool = False) -> None:
        self._name = name
        self._lock = threading.Lock()
        self.in_flight = 0
        self.peak = 0
        self.calls = 0
        self.fail_first = fail_first
        self._failed: set[int] = set()

    @property
    def model_name(self) -> str:
        return self._name

    def complete(self, messages: Sequence[Message]) -> str:
        with self._lock:
            self.in_flight += 1
            self.calls += 1
            self.peak = max(self.peak, self.in_flight)
        try:
            time.sleep(0.01)
            key = hash(messages[-1]["content"])
            with self._lock:
                first = self.fail_first and key not in self._failed
                self._failed.add(key)
            if first:
                raise Http(503)
            return "ok"
        finally:
            with self._lock:
                self.in_flight -= 1


def _hammer(models: Sequence[RetryingChatModel], requests: int, threads: int) -> None:
    def one(n: int) -> None:
        assert models[n % len(models)].complete([{"role": "user", "content": f"q{n}"}]) == "ok"

    def worker(k: int) -> None:
        for n in range(k, requests, threads):
            one(n)

    workers = [threading.Thread(target=worker, args=(k,)) for k in range(threads)]
    for w in workers:
        w.start()
    for w in workers:
        w.join(timeout=30)
    assert not any(w.is_alive() for w in workers)


def test_concurrency_never_exceeds_the_limit() -> None:
    gauge = Gauge()
    model = RetryingChatModel(gauge, limiter=ConcurrencyLimiter(3))
    _hammer([model], requests=48, threads=12)
    assert gauge.calls == 48 and gauge.peak == 3


def test_a_shared_limiter_caps_several_models_together() -> None:
    limiter = ConcurrencyLimiter(2)
    gauge = Gauge()
    answerer, judge = RetryingChatModel(gauge, limiter=limiter), RetryingChatModel(gauge, limiter=limiter)
    _hammer([answerer, judge], requests=40, threads=10)
    assert gauge.peak == 2


def test_a_request_waiting_to_retry_frees_its_slot() -> None:
    limiter = ConcurrencyLimiter(1)
    gauge = Gauge(fail_first=True)
    slot_was_free: list[bool] = []

    def take_a_slot() -> None:
        with limiter:
            pass

    def sleep(seconds: float) -> None:
        probe = threading.Thread(target=take_a_slot)
        probe.start()
        probe.join(timeout=2)
        slot_was_free.append(not probe.is_alive())

    model = RetryingChatModel(gauge, RetryPolicy(max_attempts=2), limiter=limiter, sleep=sleep)
    assert model.complete(HELLO) == "ok"
    assert slot_was_free == [True]


class ModuleGauge(Gauge):
    """A :class:`Gauge` that answers each module's prompt with an empty, valid extraction."""

    def complete(self, messages: Sequence[Message]) -> str:
        super().complete(messages)
        prompt = messages[-1]["content"]
        for title, key in (("EntityExtraction", "entities"), ("EventExtraction", "events")):
            if f'"title": "{title}"' in prompt:
                return json.dumps({key: []})
        return json.dumps({"topics": []})


@pytest.mark.parametrize(("limit", "peak"), [(1, 1), (2, 2), (8, 3)])
def test_module_extractor_sends_its_calls_together_within_the_limit(limit: int, peak: int) -> None:
    gauge = ModuleGauge()
    model = RetryingChatModel(gauge, limiter=ConcurrencyLimiter(limit))
    LLMExtractor(model, max_concurrency=8).extract(conversation(sessions=1), KnowledgeBase())
    assert gauge.calls == 3 and gauge.peak == peak


# -- the default loading path and the build -------------------------------------------------


def test_load_chat_model_wraps_with_retries_and_a_limiter(tmp_path: Path) -> None:
    answers = tmp_path / "answers.json"
    answers.write_text(json.dumps([{"match": ["hello"], "answer": "hi"}]))
    limiter = ConcurrencyLimiter(2)
    model = load_chat_model(f"recorded:{answers}", retry=RetryPolicy(max_attempts=2), limiter=limiter)
    assert isinstance(model, RetryingChatModel)
    assert model.policy.max_attempts == 2 and model.limiter is limiter
    assert model.model_name == f"recorded:{answers}", "cache keys do not change"
    assert model.complete(HELLO) == "hi"
    default = load_chat_model(f"recorded:{answers}", max_concurrency=5)
    assert isinstance(default, RetryingChatModel) and default.limiter is not None
    assert default.limiter.max_concurrency == 5 and default.policy == RetryPolicy()


def test_a_build_whose_provider_gives_up_saves_its_progress_and_resumes_to_the_same_kb(
    tmp_path: Path,
) -> None:
    def build(folder: Path, model: FakeChatModel | RetryingChatModel) -> AnchorBuilder:
        store = AnchorStore(folder)
        extractor = LLMExtractor(model, fused=True, cache=ResponseCache(store.cache_dir))
        return AnchorBuilder(extractor, HashingEmbedder(dim=64), batch_size=4, store=store)

    reference = build(tmp_path / "ref", FakeChatModel(good_answer))
    reference.add(conversation(sessions=4))

    def down_from_session_3(messages: Sequence[Message]) -> str:
        if batch_ids(messages)[0] in ("S3:1", "S4:1"):
            raise ConnectionResetError("connection reset by peer")
        return good_answer(messages)

    clock = Clock()
    flaky = RetryingChatModel(
        FakeChatModel(down_from_session_3, model_name="acme:m1"),
        RetryPolicy(max_attempts=3),
        sleep=clock.sleep,
        clock=clock,
    )
    with pytest.raises(ProviderError, match=r"^acme:m1: gave up after 3 attempt\(s\)"):
        build(tmp_path / "kb", flaky).add(conversation(sessions=4))
    saved = AnchorStore(tmp_path / "kb").load().kb
    assert len(saved.utterances) == 8, "the two batches done before the outage are kept"

    model = FakeChatModel(good_answer)
    resumed = build(tmp_path / "kb", model)
    resumed.add(conversation(sessions=4))
    assert len(model.calls) == 2 and comparable(resumed.kb) == comparable(reference.kb)


# -- the real OpenAI client against a local server ------------------------------------------


class _Script:
    def __init__(self, steps: Sequence[str]) -> None:
        self.steps = list(steps)
        self.requests = 0
        self.lock = threading.Lock()

    def next(self) -> str:
        with self.lock:
            self.requests += 1
            return self.steps.pop(0) if self.steps else "ok"


def _completion(text: str) -> bytes:
    return json.dumps(
        {
            "id": "chatcmpl-1",
            "object": "chat.completion",
            "created": 0,
            "model": "gpt-4o-mini",
            "choices": [
                {"index": 0, "message": {"role": "assistant", "content": text}, "finish_reason": "stop"}
            ],
            "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2},
        }
    ).encode()


@pytest.fixture
def fake_openai() -> Iterator[tuple[str, _Script]]:
    script = _Script([])

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:  # noqa: N802 - http.server's name
            self.rfile.read(int(self.headers.get("content-length", 0)))
            step = script.next()
            if step == "429":
                body = b'{"error": {"message": "Rate limit reached", "type": "requests"}}'
                self.send_response(429)
                self.send_header("retry-after", "0.05")
            elif step == "stall":
                time.sleep(1.0)
                body = _completion("too late")
                self.send_response(200)
            else:
                body = _completion("hello from the fake server")
                self.send_response(200)
            self.send_header("content-type", "application/json")
            self.send_header("content-length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/v1", script
    finally:
        server.shutdown()
        server.server_close()


def _chat(base_url: str, timeout: float) -> ChatModel:
    pytest.importorskip("langchain_openai")
    from langchain_openai import ChatOpenAI

    from gravity_langchain.models import LangChainChatModel

    chat = ChatOpenAI(
        model="gpt-4o-mini",
        base_url=base_url,
        api_key="sk-test",  # type: ignore[arg-type]
        max_retries=0,
        timeout=timeout,
    )
    return LangChainChatModel(chat, name="openai:gpt-4o-mini")


def test_openai_rate_limits_and_timeouts_are_retried(fake_openai: tuple[str, _Script]) -> None:
    url, script = fake_openai
    script.steps = ["429", "stall", "429", "ok"]
    clock = Clock()
    policy = RetryPolicy(max_attempts=5, initial_delay=0.01)
    model = RetryingChatModel(
        _chat(url, timeout=0.3), policy, sleep=clock.sleep, clock=clock, rng=lambda: 0.0
    )
    assert model.complete(HELLO) == "hello from the fake server"
    assert script.requests == 4
    assert clock.sleeps == [0.05, 0.0, 0.05], "Retry-After read from the SDK's response"


def test_unreachable_openai_raises_provider_error_through_the_cli(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    pytest.importorskip("langchain_openai")
    from gravity_core.cli import main

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-not-a-key")
    monkeypatch.setenv("OPENAI_BASE_URL", f"http://127.0.0.1:{port}/v1")
    monkeypatch.setenv("OPENAI_API_BASE", f"http://127.0.0.1:{port}/v1")
    convo = tmp_path / "c.jsonl"
    convo.write_text("\n".join(u.model_dump_json() for u in conversation(sessions=1)))
    argv = ["build", str(convo), "-o", str(tmp_path / "kb"), "--embedder", "hashing"]
    start = time.monotonic()
    with pytest.raises(SystemExit) as info:
        main([*argv, "--extractor", "llm", "--model", "openai:gpt-4o-mini", "--retry-attempts", "2"])
    assert info.value.code == 1
    err = capsys.readouterr().err
    assert "gravity: error: openai:gpt-4o-mini: gave up after 2 attempt(s)" in err
    assert "Connection" in err
    assert time.monotonic() - start < 20
