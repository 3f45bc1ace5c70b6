"""Turns model and embedder names (as given on the command line) into objects.

Chat models are found through the ``gravity.models`` entry-point group, so gravity_core never
imports a framework: ``openai:gpt-4o-mini`` loads the factory that gravity_langchain registers under
``openai`` and calls it with ``gpt-4o-mini``.
"""

from __future__ import annotations

from importlib.metadata import entry_points

from gravity_core.embeddings.base import Embedder
from gravity_core.errors import ConfigurationError, GravityError
from gravity_core.llm.base import ChatModel
from gravity_core.llm.retry import (
    DEFAULT_MAX_CONCURRENCY,
    ConcurrencyLimiter,
    RetryingChatModel,
    RetryPolicy,
    as_provider_error,
)

__all__ = ["MODEL_ENTRY_POINTS", "embedder_from_name", "load_chat_model", "load_embedder"]

MODEL_ENTRY_POINTS = "gravity.models"


def load_chat_model(
    spec: str,
    *,
    retry: RetryPolicy | None = None,
    max_concurrency: int = DEFAULT_MAX_CONCURRENCY,
    limiter: ConcurrencyLimiter | None = None,
) -> ChatModel:
    """Create the chat model named by ``provider:model`` (e.g. ``openai:gpt-4o-mini``).

    The model comes wrapped in a :class:`~gravity_core.llm.retry.RetryingChatModel`: rate limits,
    timeouts and connection errors are retried with capped, jittered exponential backoff, and a
    request that keeps failing raises :class:`~gravity_core.errors.ProviderError` naming the model.

    Args:
        spec: ``provider:model``.
        retry: attempts, backoff and deadline (default :class:`~gravity_core.llm.retry.RetryPolicy`).
        max_concurrency: requests in flight at once through this model.
        limiter: a limiter to share with other models instead (``max_concurrency`` is then unused).

    Raises:
        ConfigurationError: a malformed spec, an unknown provider or a bad setting.
        ProviderError: the provider could not create the model (e.g. no API key is set); the
            message names the model and what to check.
    """
    provider, sep, name = spec.partition(":")
    if not sep or not provider or not name:
        raise ConfigurationError(f"model '{spec}' is not of the form provider:model, e.g. openai:gpt-4o-mini")
    found = {ep.name: ep for ep in entry_points(group=MODEL_ENTRY_POINTS)}
    if provider not in found:
        known = ", ".join(sorted(found)) or "none installed"
        raise ConfigurationError(f"unknown model provider '{provider}' (known: {known})")
    policy = retry or RetryPolicy()
    shared = limiter or ConcurrencyLimiter(max_concurrency)
    try:
        factory = found[provider].load()
        model: ChatModel = factory(name)
    except GravityError:
        raise
    except Exception as exc:  # e.g. openai.OpenAIError: the api_key client option must be set
        raise as_provider_error(exc, spec, doing="cannot create the model") from exc
    return RetryingChatModel(model, policy, limiter=shared)


def load_embedder(spec: str, *, threads: int | None = None) -> Embedder:
    """Create an embedder: ``minilm`` (offline default) or ``hashing[:DIM]`` (deterministic, for tests).

    ``threads``: MiniLM's onnxruntime threads (``None``: one per core); several processes that
    embed at once share the cores better with fewer each.
    """
    from gravity_core.embeddings import HashingEmbedder, MiniLMEmbedder

    kind, _, arg = spec.partition(":")
    if kind == "minilm" and not arg:
        return MiniLMEmbedder(intra_op_num_threads=threads)
    if kind == "hashing":
        try:
            return HashingEmbedder(dim=int(arg)) if arg else HashingEmbedder()
        except ValueError:
            pass
    raise ConfigurationError(f"unknown embedder '{spec}' (use 'minilm' or 'hashing[:DIM]')")


def embedder_from_name(name: str) -> Embedder:
    """The embedder whose ``name`` a KB records (``minilm-l6-v2-int8``, ``hashing-256``).

    Raises:
        ConfigurationError: a KB embedded with another model; pass that embedder explicitly.
    """
    from gravity_core.embeddings import HashingEmbedder, MiniLMEmbedder

    default = MiniLMEmbedder()
    if name == default.name:
        return default
    kind, _, dim = name.partition("-")
    if kind == "hashing" and dim.isdigit():
        return HashingEmbedder(dim=int(dim))
    raise ConfigurationError(
        f"the KB was embedded with '{name}'; pass that embedder to the engine explicitly"
    )
