"""One classifier of provider faults (gravity_core.llm.faults) for GRAVITY's retries and for both
integrations: the same exception is a ProviderError through the LangChain and the LlamaIndex
embedder adapters, and passes unchanged through both when it is the caller's mistake or a bug."""

from __future__ import annotations

from typing import Any

import pytest

from gravity_core.errors import ProviderError
from gravity_core.llm.faults import is_provider_fault
from gravity_core.llm.retry import is_retryable


def _named(name: str, base: type[Exception] = Exception, **attrs: Any) -> Exception:
    """An exception of a class called ``name`` (as an SDK's would be), with ``attrs`` set."""
    exc = type(name, (base,), {})("provider said no")
    for key, value in attrs.items():
        setattr(exc, key, value)
    return exc


class APIStatusError(Exception):
    pass


class NetworkError(Exception):  # httpx's base of connection failures
    pass


CASES: list[tuple[str, Exception, bool]] = [
    ("openai rate limit", _named("RateLimitError"), True),
    ("anthropic overloaded (529)", _named("APIStatusError", status_code=529), True),
    ("status error without a status", APIStatusError("?"), True),
    ("bad request, a subclass of the status error", _named("BadRequestError", APIStatusError), False),
    ("401 with a status", _named("AuthenticationError", status_code=401), False),
    ("429 on the response", _named("HTTPStatusError", response=type("R", (), {"status_code": 429})()), True),
    ("httpx connect error", _named("ConnectError", NetworkError), True),
    ("langchain-core rate limit", _named("ModelRateLimitError"), True),
    ("a timeout", TimeoutError("slow"), True),
    ("a bug", ValueError("ours"), False),
    ("a key error", KeyError("ours"), False),
]


@pytest.mark.parametrize(("what", "exc", "fault"), CASES, ids=[c[0] for c in CASES])
def test_the_classifier_and_the_retries_agree(what: str, exc: Exception, fault: bool) -> None:
    assert is_provider_fault(exc) is fault
    assert is_retryable(exc) is fault


@pytest.mark.parametrize(("what", "exc", "fault"), CASES, ids=[c[0] for c in CASES])
def test_both_integrations_raise_the_same_provider_errors(what: str, exc: Exception, fault: bool) -> None:
    pytest.importorskip("langchain_core")
    pytest.importorskip("llama_index.core")
    from langchain_core.embeddings import Embeddings
    from llama_index.core.base.embeddings.base import BaseEmbedding

    from gravity_langchain import LangChainEmbedder
    from gravity_llamaindex import LlamaIndexEmbedder

    class FailingLangChain(Embeddings):
        def embed_documents(self, texts: list[str]) -> list[list[float]]:
            raise exc

        def embed_query(self, text: str) -> list[float]:
            raise exc

    class FailingLlamaIndex(BaseEmbedding):
        def _get_text_embedding(self, text: str) -> list[float]:
            raise exc

        def _get_query_embedding(self, query: str) -> list[float]:
            raise exc

        async def _aget_query_embedding(self, query: str) -> list[float]:
            raise exc

    for embedder in (
        LangChainEmbedder(FailingLangChain(), name="lc", dim=3),
        LlamaIndexEmbedder(FailingLlamaIndex(model_name="li"), dim=3),
    ):
        expected = ProviderError if fault else type(exc)
        with pytest.raises(expected) as raised:
            embedder.embed(["hello"])
        if fault:
            assert raised.value.__cause__ is exc
        else:
            assert raised.value is exc
