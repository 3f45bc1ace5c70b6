"""What an anchor reads as: the text it is embedded and matched by, and the queries it expands into."""

from gravity_core.anchors.expansions import (
    entity_expansions,
    event_expansions,
    expansion_key,
    topic_expansions,
)
from gravity_core.anchors.text import entity_text, event_text, topic_text

__all__ = [
    "entity_expansions",
    "entity_text",
    "event_expansions",
    "event_text",
    "expansion_key",
    "topic_expansions",
    "topic_text",
]
