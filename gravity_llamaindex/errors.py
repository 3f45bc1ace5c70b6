"""Turning a model provider's failures into GRAVITY's :class:`~gravity_core.errors.ProviderError`."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from gravity_core.errors import ProviderError

__all__ = ["PROVIDER_FAULTS", "provider_errors"]

# Exception class names of provider SDKs (openai, anthropic, httpx) that mean the provider failed,
# not our code; matched by name so this package imports none of those SDKs.
PROVIDER_FAULTS = frozenset(
    {
        "RateLimitError",
        "APITimeoutError",
        "APIConnectionError",
        "APIStatusError",
        "InternalServerError",
        "ServiceUnavailableError",
        "ConnectError",
        "ReadTimeout",
    }
)


@contextmanager
def provider_errors(provider: str) -> Iterator[None]:
    """Re-raise a provider SDK's failure inside the block as :class:`ProviderError`; others pass."""
    try:
        yield
    except Exception as exc:
        if type(exc).__name__ in PROVIDER_FAULTS:
            raise ProviderError(
                str(exc), provider=provider, status_code=getattr(exc, "status_code", None)
            ) from exc
        raise
