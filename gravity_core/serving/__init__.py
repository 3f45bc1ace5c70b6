"""Serving: one KB per user, many users' builds, and building from chat messages."""

from gravity_core.serving.many_users import ManyUsersSettings, build_users
from gravity_core.serving.messages import build_kb_from_utterances, forget_utterances
from gravity_core.serving.users import UserKBs, check_user_id

__all__ = [
    "ManyUsersSettings",
    "UserKBs",
    "build_kb_from_utterances",
    "build_users",
    "check_user_id",
    "forget_utterances",
]
