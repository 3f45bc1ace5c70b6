"""Serving: per-user KBs, many users' builds, chat messages, answer caches, search plans, agents' tools."""

from gravity_core.serving.answer_cache import AnswerCache, UserAnswerCaches
from gravity_core.serving.many_users import ManyUsersSettings, build_users
from gravity_core.serving.memory_tools import TOOL_SPECS, MemoryTools, UserMemoryTools
from gravity_core.serving.messages import build_kb_from_utterances, forget_utterances
from gravity_core.serving.users import UserKBs, check_user_id

__all__ = [
    "TOOL_SPECS",
    "AnswerCache",
    "ManyUsersSettings",
    "MemoryTools",
    "UserAnswerCaches",
    "UserKBs",
    "UserMemoryTools",
    "build_kb_from_utterances",
    "build_users",
    "check_user_id",
    "forget_utterances",
]
