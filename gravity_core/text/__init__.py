"""Text helpers every layer shares: token counting and the spaCy pipeline."""

from gravity_core.text.nlp import load_pipeline
from gravity_core.text.tokens import TokenCounter

__all__ = [
    "TokenCounter",
    "load_pipeline",
]
