"""Native (embedding-free) matching of questions against a KB's anchors, one job per module.

- :mod:`~gravity_core.query.matching.names`: entity names and aliases, misspellings, relations.
- :mod:`~gravity_core.query.matching.keywords`: keyword stems and IDF-weighted keyword indexes.
- :mod:`~gravity_core.query.matching.timeline`: events by day and participant.
- :mod:`~gravity_core.query.matching.ranking`: the best scores, with their tie-breaking.
- :mod:`~gravity_core.query.matching.lexicon`: :class:`AnchorLexicon`, the three tables of one KB
  and the entity, event and topic candidates of a question.
- :mod:`~gravity_core.query.matching.temporal`: the time a question asks about, and the events
  dated there.

Every score is made of :class:`~gravity_core.query.config.MatchWeights` (``QueryConfig.weights``).
"""

from gravity_core.query.matching.keywords import Stemmer, stem
from gravity_core.query.matching.lexicon import AnchorLexicon
from gravity_core.query.matching.temporal import TemporalQuery, parse_temporal_query, temporal_event_matches
from gravity_core.query.matching.timeline import EventDates, EventTimeline

__all__ = [
    "AnchorLexicon",
    "EventDates",
    "EventTimeline",
    "Stemmer",
    "TemporalQuery",
    "parse_temporal_query",
    "stem",
    "temporal_event_matches",
]
