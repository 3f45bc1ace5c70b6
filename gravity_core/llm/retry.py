"""Provider faults: retries with capped exponential backoff and full jitter, and a cap on calls in flight.

:class:`RetryingChatModel` wraps any :class:`~gravity_core.llm.base.ChatModel`. A request that fails
with a transient provider fault (rate limit, timeout, dropped connection, HTTP 408/409/425/429/5xx)
is sent again after a random wait drawn uniformly from ``[0, min(max_delay, initial_delay *
multiplier ** (n - 1))]`` before the n-th retry ("full jitter"), longer if the provider asked for it
with ``Retry-After``; after ``max_attempts`` requests or ``deadline`` seconds it raises
:class:`~gravity_core.errors.ProviderError` naming the model. Anything else (a rejected key, an
unknown model, a bad request, a bug in the model) is raised at once, as a ``ProviderError`` too
(:func:`as_provider_error`: the message says what to check, the original exception is its
``__cause__``). The retry loop is `tenacity <https://tenacity.readthedocs.io>`_'s.

Provider SDK errors are recognized by class name and status code, so no SDK is imported here.

A :class:`ConcurrencyLimiter` caps the requests in flight; several wrapped models can share one.
A request holds its slot only while it is sent, not while it waits to retry.
"""

from __future__ import annotations

import contextlib
import logging
import random
import re
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from types import TracebackType

from pydantic import BaseModel
from tenacity import RetryCallState, RetryError, Retrying, retry_if_exception

from gravity_core.errors import ConfigurationError, GravityError, ProviderError
from gravity_core.llm.base import ChatModel, Message, StructuredChatModel
from gravity_core.llm.faults import is_provider_fault, status_code

__all__ = [
    "DEFAULT_MAX_CONCURRENCY",
    "ConcurrencyLimiter",
    "RetryPolicy",
    "RetryingChatModel",
    "as_provider_error",
    "is_retryable",
    "missing_key_variable",
    "retry_after_seconds",
]

logger = logging.getLogger(__name__)

#: Model requests in flight at once through one limiter, unless configured otherwise.
DEFAULT_MAX_CONCURRENCY = 4

_MAX_EXPONENT = 64  # beyond this the bound is max_delay anyway; avoids float overflow


def is_retryable(exc: BaseException) -> bool:
    """Whether ``exc`` is a transient provider fault worth sending the request again.

    A status code decides when there is one (408, 409, 425, 429 and 5xx are transient; other 4xx
    are the caller's mistake). Without one: timeouts, connection errors, and
    :class:`~gravity_core.errors.ProviderError` (adapters raise it for rate limits, timeouts and
    connection failures) are transient, unless the ``ProviderError`` says it is not
    (``retryable=False``: a model's own exception, as :func:`as_provider_error` makes it).
    """
    status = status_code(exc)
    if status is None and isinstance(exc, ProviderError):
        return exc.retryable is not False
    return is_provider_fault(exc)


def retry_after_seconds(exc: BaseException) -> float | None:
    """The wait the provider asked for (``Retry-After`` / ``retry-after-ms`` headers), if any.

    Looks at ``exc`` and the exception it was raised from (adapters wrap SDK errors).
    """
    for err in (exc, exc.__cause__):
        if err is None:
            continue
        headers = getattr(getattr(err, "response", None), "headers", None)
        if headers is None or not hasattr(headers, "get"):
            continue
        for name, scale in (("retry-after-ms", 0.001), ("retry-after", 1.0)):
            raw = headers.get(name)
            try:
                seconds = float(raw) * scale if raw is not None else None
            except (TypeError, ValueError):
                seconds = None  # an HTTP date: rare, and the backoff covers it
            if seconds is not None and seconds >= 0:
                return seconds
    return None


def _names(exc: BaseException) -> set[str]:
    return {cls.__name__ for cls in type(exc).__mro__}


def _what_to_check(exc: BaseException, status: int | None) -> str:
    names = _names(exc)
    if status == 401 or names & {"AuthenticationError", "ModelAuthenticationError"}:
        return "the provider refused the API key: check the key (e.g. OPENAI_API_KEY)"
    if status == 403 or names & {"PermissionDeniedError", "ModelPermissionDeniedError"}:
        return "the API key may not use this model: check the key's permissions and the model name"
    if status == 404 or names & {"NotFoundError", "ModelNotFoundError"}:
        return "the provider does not know this model: check the model name (and the base URL)"
    if "ContextOverflowError" in names:
        return "the prompt is too long for this model: use a smaller batch size"
    if status in (400, 413, 422) or names & {
        "BadRequestError",
        "UnprocessableEntityError",
        "ModelInvalidRequestError",
    }:
        return (
            "the provider refused the request: check the model name and that it is a chat model "
            "(a prompt too long for the model needs a smaller batch size)"
        )
    if is_retryable(exc):
        return "the provider is unreachable or overloaded: try again later"
    return ""


_CHECK_SET_UP = "check the model and its set-up (API key, e.g. OPENAI_API_KEY; base URL; model name)"


def as_provider_error(exc: BaseException, provider: str, *, doing: str | None = None) -> ProviderError:
    """``exc`` as a :class:`~gravity_core.errors.ProviderError` naming ``provider`` and what to check.

    Any exception a model raises becomes one: an SDK's ``AuthenticationError`` (check the key),
    ``NotFoundError`` (check the model name), a ``RuntimeError`` of a local model... The status code
    is kept, and ``retryable`` says what :func:`is_retryable` makes of ``exc``, so a wrapped bug is
    not retried. A ``ProviderError`` is returned as it is. Raise the result ``from exc``.

    Args:
        exc: what the model raised.
        provider: the model's name, e.g. ``openai:gpt-4o-mini``.
        doing: what failed, when it was not a request (e.g. ``"cannot create the model"``).
    """
    if isinstance(exc, ProviderError):
        return exc
    status = status_code(exc)
    what = f"{doing}: " if doing else ""
    variable = missing_key_variable(exc) if status is None else None
    if variable is not None:
        return ProviderError(
            f"{what}no API key: set the {variable} environment variable", provider=provider, retryable=False
        )
    hint = _what_to_check(exc, status) or (
        _CHECK_SET_UP if doing else f"not a known provider fault: {_CHECK_SET_UP}"
    )
    return ProviderError(
        f"{what}{_describe(exc).rstrip('. ')}; {hint}",
        provider=provider,
        status_code=status,
        retryable=is_retryable(exc),
    )


# An SDK that found no key names the variable it read: openai's "Missing credentials. ... set the
# `OPENAI_API_KEY` ... environment variable" (older: "The api_key client option must be set ...").
_KEY_VARIABLE = re.compile(r"\b[A-Z][A-Z0-9]*_API_KEY\b")
_NO_KEY_WORDS = ("missing credentials", "must be set", "is not set", "not provided", "no api key")


def missing_key_variable(exc: BaseException) -> str | None:
    """The environment variable (``OPENAI_API_KEY``...) ``exc`` says holds no API key, if it says so.

    Read from the message, so no SDK is imported; an HTTP 401 (a key that was sent and refused)
    is not a missing key.
    """
    text = str(exc)
    variable = _KEY_VARIABLE.search(text)
    if variable is None or not any(words in text.lower() for words in _NO_KEY_WORDS):
        return None
    return variable.group(0)


@dataclass(frozen=True)
class RetryPolicy:
    """How often and how patiently a request is sent again after a transient fault.

    Args:
        max_attempts: requests at most, the first one included (1 disables retries).
        initial_delay: bound of the wait before the first retry, in seconds.
        multiplier: growth of the bound at each retry.
        max_delay: cap of the bound (and of a provider's ``Retry-After``), in seconds.
        deadline: no retry starts later than this many seconds after the first request
            (``None``: no deadline).

    Raises:
        ConfigurationError: a value out of range.
    """

    max_attempts: int = 6
    initial_delay: float = 1.0
    multiplier: float = 2.0
    max_delay: float = 30.0
    deadline: float | None = 300.0

    def __post_init__(self) -> None:
        if self.max_attempts < 1:
            raise ConfigurationError(f"max_attempts must be at least 1, got {self.max_attempts}")
        if self.initial_delay < 0 or self.max_delay < 0:
            raise ConfigurationError("initial_delay and max_delay must not be negative")
        if self.multiplier < 1:
            raise ConfigurationError(f"multiplier must be at least 1, got {self.multiplier}")
        if self.deadline is not None and self.deadline <= 0:
            raise ConfigurationError(f"deadline must be positive, got {self.deadline}")

    def bound(self, retry: int) -> float:
        """Upper bound of the (jittered) wait before retry number ``retry`` (1 for the first)."""
        exponent = min(max(retry - 1, 0), _MAX_EXPONENT)
        return min(self.max_delay, self.initial_delay * self.multiplier**exponent)


class ConcurrencyLimiter:
    """At most ``max_concurrency`` model requests in flight at once, across threads.

    Use as a context manager around one request; share one instance between the models that
    should count against the same limit (e.g. an answering and a judging model of one provider).

    Raises:
        ConfigurationError: ``max_concurrency`` below 1.
    """

    def __init__(self, max_concurrency: int = DEFAULT_MAX_CONCURRENCY) -> None:
        if max_concurrency < 1:
            raise ConfigurationError(f"max_concurrency must be at least 1, got {max_concurrency}")
        self.max_concurrency = max_concurrency
        self._slots = threading.BoundedSemaphore(max_concurrency)

    def __enter__(self) -> ConcurrencyLimiter:
        self._slots.acquire()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self._slots.release()


class RetryingChatModel:
    """A :class:`~gravity_core.llm.base.ChatModel` that retries transient provider faults.

    Args:
        model: the wrapped model; its ``model_name`` is kept, so response-cache keys do not change.
        policy: attempts, backoff and deadline.
        limiter: caps requests in flight (shared with other models if the same instance is given).
        provider: the name errors give (default: the model's name, e.g. ``openai:gpt-4o-mini``).
        sleep: waits the given seconds (tests pass a recorder).
        clock: monotonic seconds, for the deadline.
        rng: uniform draws in ``[0, 1)`` for the jitter.

    Attributes:
        retries: how many requests were sent again, in all.
    """

    def __init__(
        self,
        model: ChatModel,
        policy: RetryPolicy | None = None,
        *,
        limiter: ConcurrencyLimiter | None = None,
        provider: str | None = None,
        sleep: Callable[[float], None] = time.sleep,
        clock: Callable[[], float] = time.monotonic,
        rng: Callable[[], float] | None = None,
    ) -> None:
        self.model = model
        self.policy = policy or RetryPolicy()
        self.limiter = limiter
        self.provider = provider or model.model_name
        self._sleep = sleep
        self._clock = clock
        self._rng = rng or random.Random().random
        self._lock = threading.Lock()
        self.retries = 0

    def __repr__(self) -> str:
        return f"RetryingChatModel({self.model!r}, {self.policy!r})"

    @property
    def model_name(self) -> str:
        """The wrapped model's name."""
        return self.model.model_name

    def complete(self, messages: Sequence[Message]) -> str:
        """The wrapped model's answer, sending the request again on transient faults.

        Raises:
            ProviderError: still failing after the policy's attempts or deadline, or failing in a
                way retries cannot help (a rejected key, an unknown model, an error of the model).
        """
        return self._call(lambda: self.model.complete(messages))

    def complete_structured(self, messages: Sequence[Message], response_model: type[BaseModel]) -> str:
        """As :meth:`complete`, through the wrapped model's structured output when it has one."""
        model = self.model
        if isinstance(model, StructuredChatModel):
            return self._call(lambda: model.complete_structured(messages, response_model))
        return self.complete(messages)

    # -- the loop ------------------------------------------------------------------------------

    def _call(self, request: Callable[[], str]) -> str:
        start = self._clock()

        def attempt() -> str:
            with self.limiter if self.limiter is not None else contextlib.nullcontext():
                return request()

        retrying = Retrying(
            stop=lambda state: self._stop(state, start),
            wait=lambda state: self._wait(state, start),
            retry=retry_if_exception(is_retryable),
            sleep=self._sleep,
            before_sleep=self._log_retry,
            reraise=False,
        )
        try:
            return retrying(attempt)
        except RetryError as exc:
            last = exc.last_attempt.exception()
            assert last is not None  # RetryError only follows failed attempts
            raise self._exhausted(last, exc.last_attempt.attempt_number, start) from last
        except GravityError:
            raise
        except Exception as exc:  # not worth retrying: raised at once, as a ProviderError
            raise as_provider_error(exc, self.provider) from exc

    def _remaining(self, start: float) -> float:
        if self.policy.deadline is None:
            return float("inf")
        return self.policy.deadline - (self._clock() - start)

    def _stop(self, state: RetryCallState, start: float) -> bool:
        return state.attempt_number >= self.policy.max_attempts or self._remaining(start) <= 0

    def _wait(self, state: RetryCallState, start: float) -> float:
        delay = self._rng() * self.policy.bound(state.attempt_number)
        exc = state.outcome.exception() if state.outcome is not None else None
        asked = retry_after_seconds(exc) if exc is not None else None
        if asked is not None:
            delay = max(delay, min(asked, self.policy.max_delay))
        return max(0.0, min(delay, self._remaining(start)))

    def _log_retry(self, state: RetryCallState) -> None:
        with self._lock:
            self.retries += 1
        exc = state.outcome.exception() if state.outcome is not None else None
        wait = state.next_action.sleep if state.next_action is not None else 0.0
        logger.warning(
            "%s: %s; retry %d of %d in %.1f s",
            self.provider,
            _describe(exc) if exc is not None else "failed",
            state.attempt_number,
            self.policy.max_attempts - 1,
            wait,
        )

    def _exhausted(self, last: BaseException, attempts: int, start: float) -> ProviderError:
        elapsed = self._clock() - start
        return ProviderError(
            f"gave up after {attempts} attempt(s) in {elapsed:.1f} s: {_describe(last)}",
            provider=self.provider,
            status_code=status_code(last),
        )


def _describe(exc: BaseException) -> str:
    text = str(exc)
    if isinstance(exc, ProviderError) and text.startswith(f"{exc.provider}: "):
        text = text[len(exc.provider) + 2 :]
    status = status_code(exc)
    kind = type(exc).__name__ + (f" ({status})" if status is not None else "")
    return f"{kind}: {text}" if text else kind
