"""Which exceptions mean that a model or embedding provider failed, rather than the request or the code.

One classifier for every adapter (GRAVITY's retries, the LangChain and LlamaIndex adapters). It reads a
status code when the exception has one (408, 409, 425, 429 and 5xx are the provider's; any other 4xx is
the caller's mistake); otherwise timeouts, connection errors and the transient exception classes of the
provider SDKs (openai, anthropic), httpx and langchain-core, matched by class name on the class and its
bases so that no SDK is imported.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from gravity_core.errors import GravityError, ProviderError

__all__ = ["RETRYABLE_STATUS_CODES", "is_provider_fault", "provider_faults_as_errors", "status_code"]

#: HTTP statuses worth retrying (as the OpenAI and Anthropic SDKs do); every 5xx is retried too.
RETRYABLE_STATUS_CODES = frozenset({408, 409, 425, 429})

_FAULT_NAMES = frozenset(
    {
        # openai, anthropic
        "RateLimitError",
        "APITimeoutError",
        "APIConnectionError",
        "InternalServerError",
        "ServiceUnavailableError",
        # httpx
        "TimeoutException",
        "NetworkError",
        "RemoteProtocolError",
        # langchain-core 1.x, which partners such as langchain-openai raise
        "ModelRateLimitError",
        "ModelConnectionError",
        "ModelTimeoutError",
        "ModelAPIError",
    }
)

# Matched on the class itself only: its subclasses include client mistakes (BadRequestError, 401).
_EXACT_FAULT_NAMES = frozenset({"APIStatusError"})


def status_code(exc: BaseException) -> int | None:
    """The HTTP status an SDK exception carries (``status_code``, ``status`` or its response's), if any."""
    for value in (
        getattr(exc, "status_code", None),
        getattr(exc, "status", None),
        getattr(getattr(exc, "response", None), "status_code", None),
    ):
        if isinstance(value, int) and not isinstance(value, bool):
            return value
    return None


def is_provider_fault(exc: BaseException) -> bool:
    """Whether ``exc`` means the provider failed (rate limit, timeout, connection, 5xx).

    Such a fault is worth a retry, and reported as a :class:`~gravity_core.errors.ProviderError`,
    never as a bug.
    """
    status = status_code(exc)
    if status is not None:
        return status in RETRYABLE_STATUS_CODES or status >= 500
    if isinstance(exc, TimeoutError | ConnectionError) or type(exc).__name__ in _EXACT_FAULT_NAMES:
        return True
    return any(cls.__name__ in _FAULT_NAMES for cls in type(exc).__mro__)


@contextmanager
def provider_faults_as_errors(provider: str) -> Iterator[None]:
    """Re-raise a provider fault inside the block as a :class:`ProviderError` naming ``provider``.

    GRAVITY's own errors and every other exception pass unchanged.
    """
    try:
        yield
    except GravityError:
        raise
    except Exception as exc:
        if is_provider_fault(exc):
            raise ProviderError(str(exc), provider=provider, status_code=status_code(exc)) from exc
        raise
