"""The model side of extraction: the chat-model protocol and what GRAVITY adds around it.

JSON calls with re-ask, a response cache, retries of provider faults and a cap on requests in flight.
"""

from gravity_core.llm.base import ChatModel, Message
from gravity_core.llm.cache import CachedModel, ResponseCache, cache_key
from gravity_core.llm.json_call import REASK_TEMPLATE, call_json, extract_json, parse_json_answer
from gravity_core.llm.retry import ConcurrencyLimiter, RetryingChatModel, RetryPolicy

__all__ = [
    "REASK_TEMPLATE",
    "CachedModel",
    "ChatModel",
    "ConcurrencyLimiter",
    "Message",
    "ResponseCache",
    "RetryPolicy",
    "RetryingChatModel",
    "cache_key",
    "call_json",
    "extract_json",
    "parse_json_answer",
]
