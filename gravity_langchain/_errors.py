"""Telling provider failures raised through LangChain apart from bugs, to raise GRAVITY's ProviderError."""

from __future__ import annotations

from langchain_core import exceptions as lc_exceptions

__all__ = ["PROVIDER_FAULTS", "is_provider_fault"]

#: Exception class names of provider SDKs (openai, anthropic, httpx) that mean the provider failed,
#: not our code; matched by name (on the class and its bases) so this package imports no SDK.
PROVIDER_FAULTS = frozenset(
    {
        "RateLimitError",
        "APITimeoutError",
        "APIConnectionError",
        "InternalServerError",
        "ServiceUnavailableError",
        "ConnectError",
        "ReadTimeout",
    }
)

# Matched on the class itself only: its subclasses include client mistakes (BadRequestError, 401).
_EXACT_FAULTS = frozenset({"APIStatusError"})

# langchain-core's provider-neutral errors (1.x), which partners such as langchain-openai raise.
_LANGCHAIN_FAULTS: tuple[type[BaseException], ...] = tuple(
    cls
    for cls in (
        getattr(lc_exceptions, name, None)
        for name in ("ModelRateLimitError", "ModelAPIError", "ModelConnectionError", "ModelTimeoutError")
    )
    if isinstance(cls, type)
)


def is_provider_fault(exc: BaseException) -> bool:
    """Whether ``exc`` means the model or embedding provider failed (rate limit, timeout, connection, 5xx)."""
    if isinstance(exc, _LANGCHAIN_FAULTS) or type(exc).__name__ in _EXACT_FAULTS:
        return True
    return any(cls.__name__ in PROVIDER_FAULTS for cls in type(exc).__mro__)
