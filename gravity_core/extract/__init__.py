"""Extractors: observations of entities, events and topics from utterances.

The offline pipeline (spaCy, no model) or a chat model extracts them.
"""

from gravity_core.extract.base import Extractor
from gravity_core.extract.choice import make_extractor
from gravity_core.extract.llm import LLMExtractor
from gravity_core.extract.offline import OfflineExtractor

__all__ = ["Extractor", "LLMExtractor", "OfflineExtractor", "make_extractor"]
