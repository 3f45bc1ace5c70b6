"""What a host document of one conversation turn holds, as GRAVITY's document and node helpers write it.

One document per turn, under the utterance id (the id every anchor's provenance names), so the
integrations can fetch a selected anchor's source turns by id. LangChain's
``documents_from_utterances`` and LlamaIndex's ``nodes_from_utterances`` both write this.
"""

from __future__ import annotations

from gravity_core.schema import Utterance

__all__ = ["turn_metadata", "turn_text"]


def turn_text(utterance: Utterance) -> str:
    """``"<speaker>: <text>"``, attachment captions included."""
    return f"{utterance.speaker}: {utterance.full_text()}"


def turn_metadata(utterance: Utterance) -> dict[str, str]:
    """``speaker``, ``session``, ``id`` and ``date`` (ISO day): scalars, so every store keeps them."""
    return {
        "speaker": utterance.speaker,
        "session": utterance.session,
        "id": utterance.id,
        "date": utterance.day.isoformat(),
    }
