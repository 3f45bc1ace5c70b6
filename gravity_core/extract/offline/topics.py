"""Offline topic extraction: topical segments of each session, linked into arcs across sessions.

For every session of a batch the content turns (chit-chat removed) are split into topical
segments by TextTiling over their embeddings; each segment joins the most similar known topic,
or another segment of the batch, or opens a new topic; and each (topic, session) pair becomes
one :class:`~gravity_core.schema.TopicObservation` with TF-IDF keywords, an extractive summary
and a few first-person facts. No language model is involved, and the same input gives the same
output.
"""

from __future__ import annotations

import logging
import math
import re
from collections.abc import Callable, Container, Iterable, Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np
import numpy.typing as npt

from gravity_core.embeddings.base import Embedder
from gravity_core.errors import ConfigurationError
from gravity_core.extract.offline.keywords import (
    DocumentFrequencies,
    Token,
    content_tokens,
    lemmatize,
    rank_keywords,
)
from gravity_core.schema import KnowledgeBase, TopicAnchor, TopicObservation, Utterance

__all__ = ["TopicExtractor"]

logger = logging.getLogger(__name__)

_Vector = npt.NDArray[np.float32]

# A fact from a speaker not yet quoted is preferred unless it is much weaker than the best one.
_OTHER_SPEAKER_RATIO = 0.6
_FIRST_PERSON = re.compile(r"\b(?:I|I'm|I've|I'd|I'll|I’m|I’ve|my|me|mine|we|we're|we've|our|us)\b")
# A capitalized word addressed to someone: "Hey Mel!", "Thanks, Mel.", "..., Mel!"
_VOCATIVE = re.compile(
    r"\b(?:[Hh]ey|[Hh]i|[Hh]ello|[Tt]hanks|[Tt]hank you|[Bb]ye|[Cc]ongrats|[Ww]ow|[Oo]h|[Yy]eah|[Aa]w+)"
    r",?\s+([A-Z][a-z]+)\b|,\s*([A-Z][a-z]+)\s*[!?.]"
)


@dataclass
class _Content:
    """The batch's content turns (chit-chat removed), their content words and embeddings."""

    utterances: list[Utterance]
    tokens: list[list[Token]]
    vectors: _Vector


@dataclass
class _Segment:
    """A run of content turns of one session on one subject."""

    session: str
    positions: list[int]  # indexes into _Content, in time order
    vector: _Vector
    keywords: set[str]  # lemmas of its top keywords
    bag: dict[str, float]  # TF-IDF weights of its content lemmas, L2-normalized


@dataclass
class _Group:
    """Segments of the batch that go to one topic: a known one, or one new in this batch."""

    topic: TopicAnchor | None
    segments: list[_Segment] = field(default_factory=list)

    def vector(self) -> _Vector:
        return _normalize(np.sum([s.vector * len(s.positions) for s in self.segments], axis=0))

    def keywords(self) -> set[str]:
        return set().union(*(s.keywords for s in self.segments))

    def bag(self) -> dict[str, float]:
        total: dict[str, float] = {}
        for s in self.segments:
            for lemma, weight in s.bag.items():
                total[lemma] = total.get(lemma, 0.0) + weight * len(s.positions)
        return _normalize_bag(total)


class _ConversationStats:
    """What the extractor knows of the conversation: document frequencies and speaker names."""

    def __init__(self) -> None:
        self.df = DocumentFrequencies()
        self.ids: set[str] = set()
        self.speakers: set[str] = set()
        self.vocatives: set[str] = set()

    def update(self, utterances: Iterable[Utterance], tokens: Callable[[str], list[Token]]) -> None:
        for u in utterances:
            if u.id in self.ids:
                continue
            self.ids.add(u.id)
            self.df.add(u.id, (t.lemma for t in tokens(u.full_text())))
            self.speakers.add(u.speaker)
            for match in _VOCATIVE.finditer(u.text):
                self.vocatives.add(match.group(1) or match.group(2))

    def name_words(self) -> frozenset[str]:
        """Lowercase words naming a speaker, with the short forms used to address them ('Mel')."""
        words = {w.casefold() for name in self.speakers for w in re.findall(r"[^\W\d_]+", name)}
        words |= {lemmatize(w) for w in words}
        nicknames = {
            v.casefold()
            for v in self.vocatives
            if len(v) >= 3 and any(w.startswith(v.casefold()) for w in words)
        }
        return frozenset(words | nicknames)


class TopicExtractor:
    """Finds the topics of a batch of utterances and links them to the topics the KB already has.

    1. **Segmentation.** Per session, turns with fewer than ``min_content_words`` content words
       (greetings, thanks, "Wow!") are set aside. The rest are embedded (with attachment captions)
       and TextTiling depth scores are computed between windows of ``window`` turns; the deepest
       valleys become boundaries, at most one per ``segment_turns`` turns, none shallower than
       ``boundary_depth`` and no segment shorter than ``min_segment_turns``.
    2. **Linking.** A segment joins the known topic or the earlier segment group of the batch
       with the best score (cosine of the vectors plus ``keyword_weight`` times the cosine of
       their TF-IDF word profiles, so recurring names and nouns count) if the score reaches
       ``similarity_threshold``, or reaches ``margin_floor`` and beats every other candidate by
       ``margin``; otherwise it opens a new topic. The second rule serves short chats that weave
       several threads into each session: their segments are mixed, so even the right topic scores
       below the threshold, but it still stands out from the rest. A known topic's
       vector is the centroid of the turns its latest ``profile_arcs`` arc snapshots cite, read
       from ``kb.utterances``, so it is on the same scale as a segment's; a topic whose sources are
       not in the KB falls back to an embedded profile text (label, keywords, latest summaries).
       Vectors are cached per instance by text, so unchanged topics are not re-embedded.
    3. **Description.** One observation per (topic, session): keywords by TF-IDF against the
       conversation so far, a label from the top keywords for a new topic (the known label
       otherwise), the most central turn(s) as summary, and up to ``max_facts`` first-person
       statements, preferring different speakers.

    Defaults are tuned for all-MiniLM-L6-v2 on LoCoMo's multi-session chats: there, segments of
    one thread score about 0.7-0.85 with each other and unrelated segments of the same two speakers
    0.4-0.65, hence a threshold of 0.7; at 0.6 broad topics swallow neighbouring ones, at 0.75 few
    threads are followed past two sessions. About six content turns per segment matches how long
    a subject lasts in those chats. Other embedders need their own threshold.

    An instance keeps per-conversation caches (document frequencies, vectors): use one instance
    per build, from one thread at a time.

    Args:
        embedder: Any :class:`~gravity_core.embeddings.base.Embedder`.
        similarity_threshold: Minimum link score for a segment to join a topic.
        boundary_depth: Minimum TextTiling depth score of a segment boundary.
        segment_turns: Expected content turns per segment: a session of ``n`` content turns gets at
            most ``ceil(n / segment_turns)`` segments.
        window: Turns on each side of a gap compared when scoring boundaries.
        min_segment_turns: Fewest content turns in a segment.
        min_content_words: Turns with fewer content words (and no attachment) are chit-chat.
        keyword_weight: Weight of the word-profile cosine (0..1) added to the vector cosine when
            linking.
        margin_floor: Lowest score at which a segment joins a candidate that stands out.
        margin: How far the best candidate must beat the runner-up to join below the threshold.
        max_keywords: Keywords per observation.
        label_terms: Keywords joined into a new topic's label.
        max_facts: Facts per observation.
        summary_chars: Length limit of summaries and facts.
        profile_arcs: How many of a topic's latest arc snapshots represent it when linking.

    Raises:
        ConfigurationError: On an out-of-range setting.
    """

    def __init__(
        self,
        embedder: Embedder,
        *,
        similarity_threshold: float = 0.7,
        boundary_depth: float = 0.12,
        segment_turns: float = 6.0,
        window: int = 3,
        min_segment_turns: int = 3,
        min_content_words: int = 2,
        keyword_weight: float = 0.1,
        margin_floor: float = 0.55,
        margin: float = 0.1,
        max_keywords: int = 8,
        label_terms: int = 2,
        max_facts: int = 3,
        summary_chars: int = 200,
        profile_arcs: int = 2,
    ) -> None:
        if not -1.0 <= similarity_threshold <= 2.0:
            raise ConfigurationError(f"similarity_threshold must be in [-1, 2], got {similarity_threshold}")
        if boundary_depth < 0.0 or keyword_weight < 0.0 or margin < 0.0:
            raise ConfigurationError("boundary_depth, keyword_weight and margin must be >= 0")
        if not -1.0 <= margin_floor <= 2.0:
            raise ConfigurationError(f"margin_floor must be in [-1, 2], got {margin_floor}")
        if segment_turns < 1.0:
            raise ConfigurationError(f"segment_turns must be >= 1, got {segment_turns}")
        for name, value in (
            ("window", window),
            ("min_segment_turns", min_segment_turns),
            ("max_keywords", max_keywords),
            ("label_terms", label_terms),
            ("profile_arcs", profile_arcs),
        ):
            if value < 1:
                raise ConfigurationError(f"{name} must be >= 1, got {value}")
        if max_facts < 0 or min_content_words < 0:
            raise ConfigurationError("max_facts and min_content_words must be >= 0")
        if summary_chars < 40:
            raise ConfigurationError(f"summary_chars must be >= 40, got {summary_chars}")
        self._embedder = embedder
        self._threshold = similarity_threshold
        self._depth = boundary_depth
        self._segment_turns = segment_turns
        self._window = window
        self._min_turns = min_segment_turns
        self._min_words = min_content_words
        self._keyword_weight = keyword_weight
        self._margin_floor = margin_floor
        self._margin = margin
        self._max_keywords = max_keywords
        self._label_terms = min(label_terms, max_keywords)
        self._max_facts = max_facts
        self._summary_chars = summary_chars
        self._profile_arcs = profile_arcs
        self._stats = _ConversationStats()
        # Content words of each text seen, before names are dropped: a turn is read by the
        # statistics, its batch and every later topic profile citing it, but tokenized once.
        self._token_cache: dict[str, list[Token]] = {}
        self._vectors: dict[str, _Vector] = {}
        self._given: Mapping[str, _Vector] = {}
        self._keep: set[str] = set()

    def extract(
        self,
        batch: Sequence[Utterance],
        kb: KnowledgeBase,
        phrases: Mapping[str, Sequence[str]] | None = None,
    ) -> list[TopicObservation]:
        """Topic observations of ``batch``: one per (topic, session) pair, in order of appearance.

        Args:
            batch: Consecutive utterances of one or more sessions, in time order.
            kb: The KB so far, read only: its topics are linked to, and its utterances give the
                document frequencies of keyword ranking and the text of topics' sources.
            phrases: noun phrases of each utterance (by id), from a parse: a new topic is labelled
                with the phrases that carry its top keywords; without them, with the keywords.

        Returns:
            Observations whose ``topic_id`` names the known topic they extend, or ``None`` for a
            new topic; new-topic observations of one batch that belong together share a label.
        """
        if not batch:
            return []
        self._refresh_stats(batch, kb)
        names = self._stats.name_words()
        content = self._content(batch, names)
        if not content.utterances:
            return []
        segments = self._segments(content)
        groups = self._link(segments, kb, names)
        observations = self._observations(groups, content, kb, names, phrases or {})
        # Keep the vectors of this batch (the next batch's topic sources) and of current topics.
        self._vectors = {text: self._vectors[text] for text in self._keep}
        logger.debug(
            "topics: %d turns, %d segments, %d observations (%d of known topics)",
            len(batch),
            len(segments),
            len(observations),
            sum(o.topic_id is not None for o in observations),
        )
        return observations

    # -- conversation state ------------------------------------------------------------------

    def _refresh_stats(self, batch: Sequence[Utterance], kb: KnowledgeBase) -> None:
        # Counted incrementally; recounted when earlier calls saw utterances this KB lacks, so the
        # output depends on the batch and the KB only.
        if self._stats.ids - kb.utterances.keys() - {u.id for u in batch}:
            logger.debug("topics: another conversation, statistics recounted")
            self._stats = _ConversationStats()
            self._token_cache.clear()
        self._stats.update(kb.utterances.values(), self._tokens)
        self._stats.update(batch, self._tokens)
        self._keep.clear()

    def _content(self, batch: Sequence[Utterance], names: frozenset[str]) -> _Content:
        utterances: list[Utterance] = []
        tokens: list[list[Token]] = []
        for u in batch:
            if len(self._tokens(u.text, names)) < self._min_words and not u.attachments:
                continue
            utterances.append(u)
            tokens.append(self._tokens(u.full_text(), names))
        vectors = self._embed([u.full_text() for u in utterances])
        return _Content(utterances, tokens, vectors)

    def use_vectors(self, vectors: Mapping[str, _Vector]) -> None:
        """Vectors by text, made by this extractor's embedder; read before embedding anything."""
        self._given = vectors

    def _embed(self, texts: list[str]) -> _Vector:
        """Embed ``texts`` through the instance cache (texts already embedded are not embedded again)."""
        for text in texts:
            if text not in self._vectors and text in self._given:
                self._vectors[text] = self._given[text]
        missing = list(dict.fromkeys(t for t in texts if t not in self._vectors))
        if missing:
            fresh = np.asarray(self._embedder.embed(missing), dtype=np.float32)
            if fresh.ndim != 2 or fresh.shape[0] != len(missing):
                raise ConfigurationError(
                    f"embedder {self._embedder.name!r} returned an array of shape {fresh.shape} "
                    f"for {len(missing)} texts; expected ({len(missing)}, dim)"
                )
            self._vectors.update(zip(missing, fresh, strict=True))
        self._keep.update(texts)
        if not texts:
            return np.zeros((0, 1), dtype=np.float32)
        return np.stack([self._vectors[t] for t in texts])

    # -- segmentation ------------------------------------------------------------------------

    def _segments(self, content: _Content) -> list[_Segment]:
        by_session: dict[str, list[int]] = {}
        for i, u in enumerate(content.utterances):
            by_session.setdefault(u.session, []).append(i)
        segments: list[_Segment] = []
        for session, positions in by_session.items():
            for run in self._split(positions, content.vectors):
                docs = [content.tokens[p] for p in run]
                ranked = rank_keywords(docs, self._stats.df, self._max_keywords)
                vector = _centroid(content.vectors[run], docs)
                keywords = {lemma for lemma, _, _ in ranked}
                segments.append(_Segment(session, run, vector, keywords, self._bag(docs)))
        return segments

    def _split(self, positions: list[int], vectors: _Vector) -> list[list[int]]:
        """TextTiling over one session's content turns: cut at the deepest similarity valleys."""
        n = len(positions)
        budget = min(math.ceil(n / self._segment_turns), n // self._min_turns) - 1
        if budget < 1:
            return [positions]
        sims = np.empty(n - 1, dtype=np.float64)
        for gap in range(1, n):
            left = vectors[positions[max(0, gap - self._window) : gap]].sum(axis=0)
            right = vectors[positions[gap : gap + self._window]].sum(axis=0)
            sims[gap - 1] = _cosine(left, right)
        depths = [_depth(sims, i) for i in range(n - 1)]
        cuts: list[int] = []
        for i in sorted(range(n - 1), key=lambda j: (-depths[j], j)):
            if depths[i] < self._depth or len(cuts) >= budget:
                break
            edges = sorted([0, n, *cuts, i + 1])
            if all(b - a >= self._min_turns for a, b in zip(edges, edges[1:], strict=False)):
                cuts.append(i + 1)
        edges = sorted([0, n, *cuts])
        return [positions[a:b] for a, b in zip(edges, edges[1:], strict=False)]

    # -- linking -----------------------------------------------------------------------------

    def _link(self, segments: list[_Segment], kb: KnowledgeBase, names: frozenset[str]) -> list[_Group]:
        topics = list(kb.topics.values())
        profiles = [self._topic_profile(t, kb, names) for t in topics]
        known: dict[str, _Group] = {}
        new: list[_Group] = []
        order: list[_Group] = []
        for segment in segments:
            best, second, choice = -math.inf, -math.inf, None
            for topic, (vector, bag) in zip(topics, profiles, strict=True):
                score = self._score(segment, vector, bag)
                if score > best:
                    best, second, choice = score, best, known.get(topic.id) or _Group(topic)
                else:
                    second = max(second, score)
            for group in new:
                score = self._score(segment, group.vector(), group.bag())
                if score > best:
                    best, second, choice = score, best, group
                else:
                    second = max(second, score)
            if choice is None or not self._links(best, second):
                choice = _Group(None)
                new.append(choice)
            elif choice.topic is not None:
                known.setdefault(choice.topic.id, choice)
            if all(choice is not g for g in order):
                order.append(choice)
            choice.segments.append(segment)
        return order

    def _links(self, best: float, second: float) -> bool:
        """Whether a segment joins its best match: a high score, or a fair one that stands out."""
        if best >= self._threshold:
            return True
        return best >= self._margin_floor and second > -math.inf and best - second >= self._margin

    def _score(self, segment: _Segment, vector: _Vector, bag: dict[str, float]) -> float:
        cosine = float(segment.vector @ vector)
        if not self._keyword_weight:
            return cosine
        return cosine + self._keyword_weight * _bag_cosine(segment.bag, bag)

    def _tokens(self, text: str, names: frozenset[str] = frozenset()) -> list[Token]:
        """``content_tokens(text, names)``, from the instance's cache."""
        tokens = self._token_cache.get(text)
        if tokens is None:
            tokens = self._token_cache[text] = content_tokens(text)
        if not names:
            return tokens
        return [t for t in tokens if t.lemma not in names and t.surface.lower() not in names]

    def _bag(self, docs: Sequence[Sequence[Token]]) -> dict[str, float]:
        """TF-IDF profile of some turns: each lemma counted once per turn, sublinear in the count."""
        counts: dict[str, int] = {}
        for doc in docs:
            for lemma in {t.lemma for t in doc}:
                counts[lemma] = counts.get(lemma, 0) + 1
        return _normalize_bag(
            {lemma: (1.0 + math.log(n)) * self._stats.df.idf(lemma) for lemma, n in counts.items()}
        )

    def _topic_profile(
        self, topic: TopicAnchor, kb: KnowledgeBase, names: frozenset[str]
    ) -> tuple[_Vector, dict[str, float]]:
        """Vector and TF-IDF profile of a known topic, from the turns its latest arc snapshots cite.

        The vector is their centroid (else the embedded profile text); the profile covers the same
        turns (else the topic's keywords).
        """
        cited = [
            kb.utterances[i]
            for snapshot in topic.arc[-self._profile_arcs :]
            for i in snapshot.sources
            if i in kb.utterances
        ]
        if cited:
            docs = [self._tokens(u.full_text(), names) for u in cited]
            vectors = self._embed([u.full_text() for u in cited])
            return _centroid(vectors, docs), self._bag(docs)
        words = [Token(lemmatize(w.casefold()), w, False) for k in topic.keywords for w in k.split()]
        return self._embed([self._profile_text(topic)])[0], self._bag([words])

    def _profile_text(self, topic: TopicAnchor) -> str:
        summaries = [_strip_speakers(a.summary, topic.participants) for a in topic.arc[-self._profile_arcs :]]
        return ". ".join(p for p in (topic.label, ", ".join(topic.keywords), *summaries) if p)

    # -- observations ------------------------------------------------------------------------

    def _observations(
        self,
        groups: list[_Group],
        content: _Content,
        kb: KnowledgeBase,
        names: frozenset[str],
        phrases: Mapping[str, Sequence[str]],
    ) -> list[TopicObservation]:
        by_label = {t.label.casefold(): t for t in kb.topics.values()}
        labelled: dict[str, tuple[str, TopicAnchor | None, list[_Segment]]] = {}
        for group in groups:
            topic = group.topic
            fresh = {key for key, (_, known, _) in labelled.items() if known is None}
            label = (
                topic.label
                if topic is not None
                else self._new_label(group, content, by_label, fresh, phrases)
            )
            # A new topic labelled like a known one has its top keywords: the merge would join them
            # by label anyway, so it is linked here, together with the batch's other segments of it.
            topic = topic or by_label.get(label.casefold())
            if topic is not None:
                label = topic.label
            entry = labelled.setdefault(label.casefold(), (label, topic, []))
            entry[2].extend(group.segments)
        observations: list[TopicObservation] = []
        for label, topic, segments in labelled.values():
            per_session: dict[str, list[int]] = {}
            for segment in segments:
                per_session.setdefault(segment.session, []).extend(segment.positions)
            for session, positions in per_session.items():
                topic_id = topic.id if topic is not None else None
                observations.append(
                    self._observation(label, topic_id, session, sorted(positions), content, names)
                )
        position = {u.id: i for i, u in enumerate(content.utterances)}
        return sorted(observations, key=lambda o: position[o.sources[0]])

    def _new_label(
        self,
        group: _Group,
        content: _Content,
        known: Container[str],
        taken: Container[str],
        phrases: Mapping[str, Sequence[str]],
    ) -> str:
        """The group's label: the noun phrases that carry its top keywords, else the keywords.

        The label is lengthened while another new topic of the batch has it.
        """
        positions = [p for s in group.segments for p in s.positions]
        docs = [content.tokens[p] for p in positions]
        ranked = rank_keywords(docs, self._stats.df, self._max_keywords)
        if not ranked:
            return f"conversation of {content.utterances[positions[0]].session}"
        candidates = [ph for p in positions for ph in phrases.get(content.utterances[p].id, ())]
        terms = _phrase_terms(candidates, ranked) or [form for _, form, _ in ranked]
        label = " / ".join(terms[: self._label_terms])
        for form in terms[self._label_terms :]:
            if label.casefold() in known or label.casefold() not in taken:
                break
            label = f"{label} / {form}"
        return label

    def _observation(
        self,
        label: str,
        topic_id: str | None,
        session: str,
        positions: list[int],
        content: _Content,
        names: frozenset[str],
    ) -> TopicObservation:
        utterances = [content.utterances[p] for p in positions]
        docs = [content.tokens[p] for p in positions]
        ranked = rank_keywords(docs, self._stats.df, self._max_keywords)
        vectors = content.vectors[positions]
        centrality = vectors @ _centroid(vectors, docs)
        keywords = {lemma for lemma, _, _ in ranked}
        sentences = [_sentences(u.text) for u in utterances]
        return TopicObservation(
            label=label,
            keywords=[form for _, form, _ in ranked],
            participants=list(dict.fromkeys(u.speaker for u in utterances)),
            session=session,
            summary=(summary := self._summary(utterances, sentences, centrality, docs, keywords, names)),
            facts=self._facts(utterances, sentences, keywords, names, summary),
            topic_id=topic_id,
            sources=[u.id for u in utterances],
        )

    def _summary(
        self,
        utterances: list[Utterance],
        sentences: list[list[str]],
        centrality: _Vector,
        docs: list[list[Token]],
        keywords: set[str],
        names: frozenset[str],
    ) -> str:
        """The segment's summary: the sentences of its most central turns richest in its keywords.

        They are in time order, each turn's prefixed by its speaker, within ``summary_chars``.

        Greetings, thanks and questions around them ("Hey Caroline, since we last chatted, ...")
        are left out, so the summary's characters go to what happened. A segment with no such
        sentence keeps its most central turns whole.
        """
        # Centrality favours short generic turns a little; content words tip the balance back.
        scores = [float(c) * min(1.0, len(d) / 6) ** 0.5 for c, d in zip(centrality, docs, strict=True)]
        picked = self._summary_sentences(utterances, sentences, scores, keywords, names)
        if picked:
            by_turn: dict[int, list[str]] = {}
            for index, _, sentence in sorted(picked):
                by_turn.setdefault(index, []).append(sentence)
            text = " ".join(f"{utterances[i].speaker}: {' '.join(s)}" for i, s in by_turn.items())
            return _trim(text, self._summary_chars)
        ranking = sorted(range(len(utterances)), key=lambda i: (-scores[i], i))
        chosen = ranking[:1]
        if len(ranking) > 1:
            both = len(_turn_text(utterances[ranking[0]])) + len(_turn_text(utterances[ranking[1]])) + 1
            if both <= self._summary_chars:
                chosen.append(ranking[1])
        return _trim(" ".join(_turn_text(utterances[i]) for i in sorted(chosen)), self._summary_chars)

    def _summary_sentences(
        self,
        utterances: list[Utterance],
        sentences: list[list[str]],
        scores: list[float],
        keywords: set[str],
        names: frozenset[str],
    ) -> list[tuple[int, int, str]]:
        """``(turn, sentence number, sentence)`` of the summary, best first until the length is reached.

        ``sentences`` are each turn's.
        """
        candidates: list[tuple[float, int, int, str]] = []
        for index, turn_sentences in enumerate(sentences):
            for number, sentence in enumerate(turn_sentences):
                if sentence.endswith("?"):
                    continue
                lemmas = {t.lemma for t in content_tokens(sentence, names)}
                if len(lemmas) < 2:
                    continue
                share = len(lemmas & keywords) / len(lemmas)
                weight = min(1.0, len(lemmas) / 6) ** 0.5 * (1.0 + share)
                candidates.append((scores[index] * weight, index, number, sentence))
        candidates.sort(key=lambda c: (-c[0], c[1], c[2]))
        picked: list[tuple[int, int, str]] = []
        used = 0
        for _, index, number, sentence in candidates:
            cost = len(sentence) + len(utterances[index].speaker) + 3
            if picked and used + cost > self._summary_chars:
                continue
            picked.append((index, number, sentence))
            used += cost
        return picked

    def _facts(
        self,
        utterances: list[Utterance],
        sentences: list[list[str]],
        keywords: set[str],
        names: frozenset[str],
        summary: str,
    ) -> list[str]:
        """First-person statements rich in rare words and the segment's keywords, varied in speaker.

        None that the summary already quotes is taken (``sentences`` are each turn's).
        """
        if self._max_facts == 0:
            return []
        candidates: list[tuple[float, int, str, str]] = []
        for index, (u, turn_sentences) in enumerate(zip(utterances, sentences, strict=True)):
            for sentence in turn_sentences:
                if (
                    sentence in summary
                    or sentence.endswith("?")
                    or not 5 <= len(sentence.split()) <= 45
                    or not _FIRST_PERSON.search(sentence)
                ):
                    continue
                lemmas = {t.lemma for t in content_tokens(sentence, names)}
                if len(lemmas) < 2:
                    continue
                score = sum(self._stats.df.idf(w) * (2.0 if w in keywords else 1.0) for w in lemmas)
                candidates.append((score, index, u.speaker, sentence))
        candidates.sort(key=lambda c: (-c[0], c[1]))
        chosen: list[tuple[float, int, str, str]] = []
        while candidates and len(chosen) < self._max_facts:
            used = {c[2] for c in chosen}
            pick = candidates[0]
            other = next((c for c in candidates if c[2] not in used), None)
            if pick[2] in used and other is not None and other[0] >= _OTHER_SPEAKER_RATIO * pick[0]:
                pick = other
            chosen.append(pick)
            candidates.remove(pick)
        chosen.sort(key=lambda c: c[1])
        return [_trim(f"{speaker}: {sentence}", self._summary_chars) for _, _, speaker, sentence in chosen]


_MAX_PHRASE_WORDS = 4


def _phrase_terms(phrases: Sequence[str], ranked: Sequence[tuple[str, str, float]]) -> list[str]:
    """Noun phrases ranked by the keyword weight they carry, one per keyword.

    Repeats count once more each. The terms read "pottery class", "wonky bowls" rather than
    "pottery / bowl".
    """
    weights = {lemma: score for lemma, _, score in ranked}
    scored: dict[str, tuple[float, str, frozenset[str]]] = {}
    for text in phrases:
        words = text.split()
        if not words or len(words) > _MAX_PHRASE_WORDS:
            continue
        lemmas = frozenset(lemmatize(w.casefold()) for w in words)
        carried = [weights[lemma] for lemma in lemmas if lemma in weights]
        if not carried:
            continue
        score = sum(carried) / (1.0 + 0.25 * (len(words) - len(carried)))
        key = text.casefold()
        old = scored.get(key)
        scored[key] = (score if old is None else old[0] + 0.5 * score, text, lemmas)
    out: list[str] = []
    used: set[str] = set()
    for _, text, lemmas in sorted(scored.values(), key=lambda item: -item[0]):
        if lemmas & used:
            continue
        out.append(text)
        used |= lemmas
    return out


def _centroid(vectors: _Vector, docs: Sequence[Sequence[Token]]) -> _Vector:
    """Mean of the turn vectors, weighted by content words (capped), L2-normalized."""
    weights = np.array([min(len(d), 10) + 1 for d in docs], dtype=np.float32)
    return _normalize((vectors * weights[:, None]).sum(axis=0))


def _normalize_bag(bag: dict[str, float]) -> dict[str, float]:
    norm = math.sqrt(sum(w * w for w in bag.values()))
    return {k: w / norm for k, w in bag.items()} if norm > 0 else {}


def _bag_cosine(a: dict[str, float], b: dict[str, float]) -> float:
    if len(b) < len(a):
        a, b = b, a
    return sum(w * b.get(k, 0.0) for k, w in a.items())


def _normalize(vector: npt.NDArray[np.floating]) -> _Vector:
    norm = float(np.linalg.norm(vector))
    return np.asarray(vector / norm if norm > 0 else vector, dtype=np.float32)


def _cosine(a: npt.NDArray[np.floating], b: npt.NDArray[np.floating]) -> float:
    na, nb = float(np.linalg.norm(a)), float(np.linalg.norm(b))
    return float(a @ b) / (na * nb) if na > 0 and nb > 0 else 0.0


def _depth(sims: npt.NDArray[np.float64], i: int) -> float:
    """TextTiling depth of gap ``i``: how far it lies below the nearest peaks on either side."""
    left = sims[i]
    for j in range(i - 1, -1, -1):
        if sims[j] < left:
            break
        left = sims[j]
    right = sims[i]
    for j in range(i + 1, len(sims)):
        if sims[j] < right:
            break
        right = sims[j]
    return float((left - sims[i]) + (right - sims[i]))


def _sentences(text: str) -> list[str]:
    """The sentences of ``text``, whitespace folded."""
    import nupunkt

    found = nupunkt.sent_tokenize(text)
    return [" ".join(raw.split()) for raw in found if isinstance(raw, str) and raw.strip()]


def _turn_text(u: Utterance) -> str:
    return f"{u.speaker}: {' '.join(u.text.split()) or ' '.join(u.full_text().split())}"


def _strip_speakers(summary: str, speakers: Sequence[str]) -> str:
    for speaker in speakers:
        summary = summary.replace(f"{speaker}: ", "")
    return summary


def _trim(text: str, limit: int) -> str:
    if len(text) <= limit:
        return text
    cut = text[: limit - 1]
    space = cut.rfind(" ")
    if space > limit // 2:
        cut = cut[:space]
    return cut.rstrip(" ,;:-") + "…"
