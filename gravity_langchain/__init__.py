"""GRAVITY for LangChain: chat-model adapter (retriever and runnable come with the integration issue)."""

from gravity_langchain.models import LangChainChatModel, openai_chat_model

__all__ = ["LangChainChatModel", "openai_chat_model"]
