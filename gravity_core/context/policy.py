"""The context policy: how expansions' hits join the question's, and how a token budget is shared.

The budget is shared between GRAVITY's anchor blocks and the host's memories.

Every path that turns a question into context uses it: the LangChain retriever and chain, the
LlamaIndex fusion retriever and postprocessor, the SGMem retrievers and ``gravity eval``, so the
evaluation measures what the integrations ship.

**Merging hits.** An expansion may only add what the question's own search has not placed, never
push the question's best hits out. The merged list starts with the question's first ``lead``
hits; after them every ``every``-th place goes to an expansion hit and the others to the
question's next hits. Expansion hits are taken round robin by rank (each expansion's best hit,
then each one's second, down to ``depth``), and a hit already placed is skipped. The order does
not depend on how many results are asked for: the first ``k`` of a longer merge are the merge at
``k``. An expansion hit thus only displaces the question's weaker tail, by a bounded share.

**Source turns.** The selected anchors' source turns, fetched from the host by id, take every
``source_every``-th place after the question's first ``source_lead`` hits. The surest come first,
whatever their anchor's kind: each turn ranks by its anchor's score for the question times the
turn's fit (how much of the question it holds; :class:`~gravity_core.query.provenance.SourceRanker`),
up to ``sources_per_anchor`` per anchor (:meth:`ContextPolicy.source_turns`). Against events
first, then profiles, 4 each, this order, with topics and 8 each, raised evidence recall on the
LoCoMo dev split at 800 / 1,500 / 3,000 tokens from 0.692 / 0.757 / 0.816 to 0.719 / 0.769 / 0.820
(vector host), 0.737 / 0.776 / 0.839 to 0.747 / 0.788 / 0.841 (SGMem) and 0.682 / 0.737 / 0.784 to
0.696 / 0.742 / 0.796 (BM25), answer coverage within 0.005 or up; on LongMemEval-S dev, vector host,
from 0.751 / 0.806 / 0.906 to 0.786 / 0.857 / 0.889, answer coverage 0.667 / 0.771 / 0.833 to
0.729 / 0.792 / 0.833 (docs/design/provenance.md). 12 per anchor rather than 8, once a profile or
topic resting on few utterances brings all of them, raised it at 3,000 tokens (vector 0.823 ->
0.829, SGMem 0.842 -> 0.851, BM25 0.819 -> 0.823) and left it within 0.003 at 800 and 1,500.

**Sharing a budget.** The anchors take ``anchor_share`` of what a total budget has beyond
``host_reserve`` tokens, at most ``max_anchor_tokens``, and nothing when that is below
``min_anchor_tokens``, so a small budget stays the host's memories and the anchors' part grows with
the budget up to the cap (800 -> 0, 1,500 -> 275, 3,000 -> 300 tokens with the defaults; the query
settings' ``token_budget`` caps it too).

**Bounding the fetched turns.** A turn fetched by provenance is a guess about the question; its cost
is the host's turns it pushes out of the budget. So :meth:`ContextPolicy.fill` keeps a fetched turn
in its source place only when it takes at most ``max_source_turn_share`` of the memories' tokens
and the fetched turns kept so far, with it, at most ``max_sources_share``; otherwise the turn is
what the question's own search made it (back at its rank there, or out). On LongMemEval-S dev,
whose assistant turns run to hundreds of tokens, the 240 fetched turns of 400 tokens or more
placed at the three budgets held no gold turn, while the host's turns they pushed out held 0.02
to 0.4 per 1,000 tokens; with the bounds (0.12 and 0.5) evidence recall at 1,500 / 3,000 tokens rose
from 0.857 / 0.910 to 0.901 / 0.915 (vector host), 0.872 / 0.906 to 0.915 / 0.927 (SGMem) and
0.847 / 0.903 to 0.872 / 0.916 (BM25), and the question types more than 0.01 below the host went
from 14 to 5 of 108 cells; LoCoMo dev stayed within 0.004 but for the vector host at 800 tokens
(0.721 -> 0.709), where fetched turns of 100 to 150 tokens were worth keeping, and answer
coverage at 1,500 reached the host's at 3,000 for every host (docs/design/provenance.md).

**Why these defaults** (``gravity eval locomo`` on the dev split, 762 questions, vector host,
offline extractor, MiniLM; docs/design/context-policy.md): with expansions placed early (``lead`` 1-5)
evidence recall at 800 tokens fell from 0.613 to 0.584-0.606, because the expansions' best hits
are worth less than the question's own hits up to about rank 25; placed after the question's
first 25 hits they never lowered recall (and, before retrieval by provenance, raised it at 1,500,
0.699 -> 0.713, and 3,000, 0.786 -> 0.801). Since the selected anchors' source turns are fetched
by provenance, the expansions' hits add nothing measurable: full GRAVITY with ``every`` 1 against 0
gives evidence recall 0.692 / 0.755 / 0.817 against 0.692 / 0.757 / 0.816 at 800 / 1,500 / 3,000
tokens and answer coverage 0.541 / 0.651 / 0.710 against 0.541 / 0.654 / 0.710 (SGMem and BM25
hosts within 0.005 too), and at the integrations' default ``k`` (LangChain 4, LlamaIndex 10) they
were never placed (``lead`` 25). So ``every`` is 0: the shipped path neither embeds nor searches
the expansions (the engine still makes them, a few string joins, for
``GravityQueryTransform`` and for :data:`EXPANDING_POLICY`, the paper's query expansion).
Anchor text beyond about 170 tokens at 1,500 adds no answer coverage (0.600-0.606 for 167 to 441
tokens) and costs host turns, so the share stays small. Since the source turns come by provenance,
text beyond 300 tokens adds none at 3,000 either: capped at 300 rather than the share's 650,
answer coverage at 3,000 stays (vector 0.706 -> 0.710, SGMem 0.715 -> 0.713, BM25 0.701 -> 0.702;
LongMemEval-S dev unchanged) and evidence recall rises (LoCoMo vector 0.829 -> 0.844, SGMem 0.851
-> 0.861, BM25 0.823 -> 0.830; LongMemEval vector 0.889 -> 0.910, SGMem 0.932 -> 0.906, BM25 0.907
-> 0.903: a long turn the host ranked high fits the larger room and displaces shorter ones).
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Generic, TypeVar

from gravity_core.context.fusion import DEFAULT_RRF_C
from gravity_core.context.provenance import SourcedAnchor, SourceTurn
from gravity_core.context.window import BudgetShare, Placement, fill_budget, fill_sourced
from gravity_core.errors import ConfigurationError
from gravity_core.schema import AnchorKind

__all__ = ["DEFAULT_POLICY", "EXPANDING_POLICY", "ContextPolicy", "MergedHit", "QueryHit", "placement_of"]

T = TypeVar("T")

QUESTION = "question"
EXPANSION = "expansion"
PROVENANCE = "provenance"

_Pick = tuple[Hashable, str]


@dataclass(frozen=True)
class QueryHit:
    """One query that found a document: ``query`` is ``"question"``, ``"expansion"`` or ``"provenance"``.

    ``index`` is the expansion's number (0 for the question), ``rank`` the document's rank in that
    query's results (from 1). A document fetched by provenance has the anchor that names it as a
    source as ``text`` (``"event:e12"``), the anchor's number among those fetched as ``index`` and
    its place among the fetched turns as ``rank``.
    """

    query: str
    index: int
    text: str
    rank: int

    def as_dict(self) -> dict[str, object]:
        """The hit's fields as a plain dict, as a document's ``gravity_found_by`` metadata lists it."""
        return {"query": self.query, "index": self.index, "text": self.text, "rank": self.rank}


@dataclass(frozen=True)
class MergedHit(Generic[T]):
    """A document in the merged list, with why it is there.

    Attributes:
        item: the host's document (or node, or passage).
        slot: ``"question"`` when it holds one of the question's places, ``"provenance"`` when it
            was fetched as a selected anchor's source, ``"expansion"`` when an expansion added it.
        score: its reciprocal-rank score over every query that found it, ``sum(1 / (c + rank))``
            (the question's list weighted like the others); informative only, the order is the
            policy's.
        found_by: every query whose results held it, the question first.
    """

    item: T
    slot: str
    score: float
    found_by: tuple[QueryHit, ...] = field(default_factory=tuple)

    @property
    def placement(self) -> Placement:
        """Whether it holds a source place, and its rank in the question's own results."""
        ranks = [hit.rank for hit in self.found_by if hit.query == QUESTION]
        return Placement(self.slot == PROVENANCE, min(ranks, default=None))

    def metadata(self) -> dict[str, object]:
        """What a returned Document / Node carries in its metadata (keys prefixed ``gravity_``)."""
        return {
            "gravity_score": self.score,
            "gravity_slot": self.slot,
            "gravity_found_by": [hit.as_dict() for hit in self.found_by],
        }


@dataclass(frozen=True)
class ContextPolicy:
    """How expansions' hits join the question's and how a total token budget is shared.

    Attributes:
        lead: the question's hits that always come first.
        every: after the lead, every ``every``-th place is an expansion's (0, the default: expansions
            are neither searched nor placed; :data:`EXPANDING_POLICY` has 1).
        depth: hits of each expansion's results that may be added.
        rrf_c: the constant of the informative reciprocal-rank score.
        anchor_share: the anchors' share of a budget beyond ``host_reserve``.
        host_reserve: tokens of every budget kept for the host's memories.
        min_anchor_tokens: a smaller share than this gives the anchors nothing: the instruction
            and block tags leave it room for one or two items, worth less than the host's turns
            they would displace.
        max_anchor_tokens: the anchors' part of any budget at most (``None``: no cap but the
            query settings').
        source_kinds: the kinds of anchor whose sources are fetched.
        sources_per_anchor: source turns fetched per anchor at most (0: no retrieval by provenance).
        source_lead: the question's hits that come before any fetched source turn.
        source_every: after ``source_lead``, every ``source_every``-th place is a source turn's
            (0: source turns are not placed).
        max_source_turn_share: a fetched turn longer than this share of the memories' tokens
            takes no source place (:meth:`fill`).
        max_sources_share: the fetched turns in source places take at most this share of the
            memories' tokens together (:meth:`fill`).
    """

    lead: int = 25
    every: int = 0
    depth: int = 1
    rrf_c: int = DEFAULT_RRF_C
    anchor_share: float = 0.25
    host_reserve: int = 400
    min_anchor_tokens: int = 150
    max_anchor_tokens: int | None = 300
    source_kinds: tuple[AnchorKind, ...] = (AnchorKind.EVENT, AnchorKind.ENTITY, AnchorKind.TOPIC)
    sources_per_anchor: int = 12
    source_lead: int = 2
    source_every: int = 2
    max_source_turn_share: float = 0.12
    max_sources_share: float = 0.5

    def __post_init__(self) -> None:
        if self.lead < 0 or self.every < 0 or self.depth < 1 or self.rrf_c < 0:
            raise ConfigurationError(
                f"ContextPolicy needs lead >= 0, every >= 0, depth >= 1, rrf_c >= 0; got {self}"
            )
        if min(self.sources_per_anchor, self.source_lead, self.source_every) < 0:
            raise ConfigurationError(
                f"ContextPolicy needs sources_per_anchor, source_lead and source_every >= 0; got {self}"
            )
        if len(set(self.source_kinds)) != len(self.source_kinds):
            raise ConfigurationError(f"ContextPolicy's source_kinds repeat a kind: {self.source_kinds}")
        if not 0.0 <= self.anchor_share < 1.0 or self.host_reserve < 0 or self.min_anchor_tokens < 0:
            raise ConfigurationError(
                "ContextPolicy needs 0 <= anchor_share < 1, host_reserve >= 0 and min_anchor_tokens >= 0;"
                f" got {self}"
            )
        if self.max_anchor_tokens is not None and self.max_anchor_tokens < 1:
            raise ConfigurationError(f"ContextPolicy needs max_anchor_tokens >= 1 or None; got {self}")
        if not (0.0 < self.max_source_turn_share <= 1.0 and 0.0 < self.max_sources_share <= 1.0):
            raise ConfigurationError(
                "ContextPolicy needs 0 < max_source_turn_share <= 1 and 0 < max_sources_share <= 1;"
                f" got {self}"
            )

    # -- merging ------------------------------------------------------------------------------

    def merge(
        self,
        question: str,
        question_hits: Sequence[T],
        expansions: Sequence[str],
        expansion_hits: Sequence[Sequence[T]],
        key: Callable[[T], Hashable],
        *,
        top_n: int | None = None,
        sourced: Sequence[tuple[str, T]] = (),
    ) -> list[MergedHit[T]]:
        """The question's hits with the source turns' and the expansions' additions, best first.

        See the module doc.

        Args:
            question: the question's text (recorded in ``found_by``).
            question_hits: the question's own results, best first.
            expansions: the expanded queries' texts, in the engine's order.
            expansion_hits: one result list per expansion, best first.
            key: what makes two results the same document.
            top_n: how many to return (all when ``None``).
            sourced: the documents fetched by provenance, in :meth:`source_turns` order, each with
                the label of the anchor that named it.

        Raises:
            ConfigurationError: ``expansions`` and ``expansion_hits`` differ in length, or
                ``top_n`` is below 1.
        """
        if len(expansions) != len(expansion_hits):
            raise ConfigurationError(f"{len(expansion_hits)} result lists for {len(expansions)} expansions")
        if top_n is not None and top_n < 1:
            raise ConfigurationError(f"top_n must be at least 1, got {top_n}")
        found = _found_by(question, question_hits, expansions, expansion_hits, key, sourced)
        stream = self._expansion_stream([_unique(hits, key)[: self.depth] for hits in expansion_hits])
        own = self._own(_unique(question_hits, key), _unique([item for _, item in sourced], key))
        picks, _ = self._place(own, stream, top_n)
        merged: list[MergedHit[T]] = []
        for taken, slot in picks:
            hits, item = found[taken]
            merged.append(MergedHit(item, slot, sum(1.0 / (self.rrf_c + h.rank) for h in hits), tuple(hits)))
        return merged

    def places_sources(self, top_n: int) -> bool:
        """Whether a turn fetched by provenance can take one of ``top_n`` places."""
        return (
            self.source_every > 0
            and self.sources_per_anchor > 0
            and bool(self.source_kinds)
            and top_n > self.source_lead
        )

    def source_turns(self, sources: Sequence[SourcedAnchor]) -> list[SourceTurn]:
        """The turns to fetch by provenance, in the order they are placed; each utterance once.

        The first ``sources_per_anchor`` sources of each anchor of ``source_kinds``, the surest
        first whatever the anchor's kind: by the anchor's score times the source's fit (in
        selection order among equals). Empty when the policy places none.
        """
        if self.source_every == 0 or self.sources_per_anchor == 0:
            return []
        kinds = set(self.source_kinds)
        ranked: list[tuple[float, int, str, str]] = []
        for anchor in (a for a in sources if a.kind in kinds):
            for position, utterance_id in enumerate(anchor.utterance_ids[: self.sources_per_anchor]):
                ranked.append((-anchor.score * anchor.fit(position), len(ranked), utterance_id, anchor.label))
        turns: dict[str, SourceTurn] = {}
        for _, _, utterance_id, label in sorted(ranked):
            turns.setdefault(utterance_id, SourceTurn(utterance_id, label))
        return list(turns.values())

    def places_expansions(self, top_n: int, fetch: int | None) -> bool:
        """Whether an expansion's hit can take one of ``top_n`` places.

        Not when expansions add nothing (``every`` 0), nor when all ``top_n`` places lie within the
        lead and the question's own search, fetching ``fetch`` hits (``None``: unknown), fills them.
        """
        if self.every == 0:
            return False
        return fetch is None or fetch < top_n or top_n > self.lead

    def merge_searching(
        self,
        question: str,
        question_hits: Sequence[T],
        expansions: Sequence[str],
        search: Callable[[int], Sequence[T]],
        key: Callable[[T], Hashable],
        *,
        top_n: int | None = None,
        sourced: Sequence[tuple[str, T]] = (),
    ) -> tuple[list[MergedHit[T]], int]:
        """:meth:`merge`, searching the expansions in order only while the merge can take more of their hits.

        With ``depth`` 1 the merge takes each expansion's best hit, in the expansions' order. Once
        the expansions searched fill every place the merge gives expansions (the ``top_n`` places
        after the lead, less those their hits already hold), the others cannot change which
        documents are placed or where, so they are not searched. ``found_by`` then names only the
        queries searched. With a larger ``depth``, or no ``top_n``, every expansion is searched
        (with ``every`` 0, none).

        Args:
            question: the question's text (recorded in ``found_by``).
            question_hits: the question's own results, best first.
            expansions: the expanded queries' texts, in the engine's order.
            search: expansion ``n``'s results (``n`` from 0), best first.
            key: what makes two results the same document.
            top_n: how many to return (all when ``None``).
            sourced: the documents fetched by provenance (see :meth:`merge`).

        Returns:
            The merged hits, and how many expansions were searched.

        Raises:
            ConfigurationError: ``top_n`` is below 1.
        """
        if top_n is not None and top_n < 1:
            raise ConfigurationError(f"top_n must be at least 1, got {top_n}")
        searched: list[Sequence[T]] = []
        if self.every > 0 and self.depth == 1 and top_n is not None:
            own = self._own(_unique(question_hits, key), _unique([item for _, item in sourced], key))
            firsts: list[list[Hashable]] = []
            while (
                len(searched) < len(expansions) and self._place(own, self._expansion_stream(firsts), top_n)[1]
            ):
                searched.append(search(len(searched)))
                firsts.append(_unique(searched[-1], key)[:1])
        elif self.every > 0:
            searched = [search(n) for n in range(len(expansions))]
        merged = self.merge(
            question, question_hits, expansions[: len(searched)], searched, key, top_n=top_n, sourced=sourced
        )
        return merged, len(searched)

    def _own(self, question: list[Hashable], sourced: list[Hashable]) -> list[_Pick]:
        """The question's hits with the source turns placed among them (before any expansion's)."""
        own = [(item, QUESTION) for item in question]
        if not sourced or self.source_every == 0:
            return own
        return _interleave(own, sourced, PROVENANCE, self.source_lead, self.source_every, None)[0]

    def _place(self, own: list[_Pick], stream: list[Hashable], top_n: int | None) -> tuple[list[_Pick], bool]:
        """The merge's documents (keys) and slots, and whether it wanted an expansion hit past the last."""
        return _interleave(own, stream if self.every else [], EXPANSION, self.lead, self.every, top_n)

    @staticmethod
    def _expansion_stream(unique: Sequence[Sequence[Hashable]]) -> list[Hashable]:
        """Each expansion's first hits (``unique``, to ``depth``) round robin by rank, without repeats."""
        stream: dict[Hashable, None] = {}
        for rank in range(max(map(len, unique), default=0)):
            for hits in unique:
                if rank < len(hits):
                    stream.setdefault(hits[rank], None)
        return list(stream)

    # -- budget -------------------------------------------------------------------------------

    def anchor_tokens(self, total_budget: int, cap: int | None = None) -> int:
        """The anchors' part of ``total_budget`` tokens, at most ``cap``; the host's memories get the rest.

        ``cap`` is the query settings' own ``token_budget``, when they have one; ``max_anchor_tokens``
        caps the part too.
        """
        if total_budget < 1:
            raise ConfigurationError(f"a token budget must be at least 1, got {total_budget}")
        share = int(self.anchor_share * (total_budget - self.host_reserve))
        if share < max(1, self.min_anchor_tokens):
            return 0
        return min([share, *(limit for limit in (cap, self.max_anchor_tokens) if limit is not None)])

    def share(self, total_budget: int, cap: int | None = None) -> BudgetShare:
        """``total_budget`` shared: the anchors' part (:meth:`anchor_tokens`), the memories the rest."""
        return BudgetShare(total_budget, self.anchor_tokens(total_budget, cap))

    def fill(
        self,
        ranking: Iterable[T],
        budget: int,
        tokens: Callable[[T], int],
        placement: Callable[[T], Placement] | None = None,
    ) -> list[T]:
        """The memories that fill ``budget`` tokens, in rank order (see the module doc).

        Without ``placement`` (nothing came by provenance), :func:`fill_budget`. With it, a turn
        fetched by provenance keeps its source place only when it takes at most
        ``max_source_turn_share`` of ``budget`` and the fetched turns kept so far, with it, at most
        ``max_sources_share``; otherwise it goes back to its rank in the question's own results
        (:func:`~gravity_core.context.window.fill_sourced`).

        Args:
            ranking: the memories, best first (the policy's merge).
            budget: the tokens the memories may take.
            tokens: the tokens of one memory.
            placement: why a memory holds its place (:attr:`MergedHit.placement`, or
                :func:`placement_of` a returned document's metadata).
        """
        if placement is None:
            return fill_budget(ranking, budget, tokens)
        return fill_sourced(
            ranking,
            budget,
            tokens,
            placement,
            turn_limit=self.max_source_turn_share * budget,
            sources_limit=self.max_sources_share * budget,
        )


def placement_of(metadata: Mapping[str, object]) -> Placement:
    """The :class:`~gravity_core.context.window.Placement` a merged document's metadata records.

    Reads ``gravity_slot`` and ``gravity_found_by`` (:meth:`MergedHit.metadata`); a document
    without them (not merged by the policy) holds a place of the question's, rank unknown.
    """
    found_by = metadata.get("gravity_found_by")
    ranks = [
        hit["rank"]
        for hit in (found_by if isinstance(found_by, list) else [])
        if isinstance(hit, Mapping) and hit.get("query") == QUESTION and isinstance(hit.get("rank"), int)
    ]
    return Placement(metadata.get("gravity_slot") == PROVENANCE, min(ranks, default=None))


def _interleave(
    first: list[_Pick], second: list[Hashable], slot: str, lead: int, every: int, top_n: int | None
) -> tuple[list[_Pick], bool]:
    """``first`` with ``second``'s keys (in ``slot``) taking every ``every``-th place after ``lead``.

    A place of ``second``'s goes to ``first`` when ``second`` has nothing left, and one of
    ``first``'s to ``second`` only when ``first`` has run out; keys already placed are skipped.
    Also returns whether a place of ``second``'s found nothing left there (more would be taken).
    """
    placed: set[Hashable] = set()
    ahead = _Cursor(first, placed)
    added = _Cursor([(key, slot) for key in second], placed)
    picks: list[_Pick] = []
    starved = False
    while top_n is None or len(picks) < top_n:
        position = len(picks)
        second_place = every > 0 and position >= lead and (position - lead) % every == every - 1
        pick = None
        for cursor in (added, ahead) if second_place else (ahead, added):
            pick = cursor.take()
            if pick is not None:
                break
            starved = starved or cursor is added
        if pick is None:
            break
        picks.append(pick)
    return picks, starved


class _Cursor:
    """Walks a list of (key, slot) picks, skipping keys already placed."""

    def __init__(self, picks: list[_Pick], placed: set[Hashable]) -> None:
        self.picks, self.placed, self.at = picks, placed, 0

    def take(self) -> _Pick | None:
        while self.at < len(self.picks):
            pick = self.picks[self.at]
            self.at += 1
            if pick[0] not in self.placed:
                self.placed.add(pick[0])
                return pick
        return None


def _found_by(
    question: str,
    question_hits: Sequence[T],
    expansions: Sequence[str],
    expansion_hits: Sequence[Sequence[T]],
    key: Callable[[T], Hashable],
    sourced: Sequence[tuple[str, T]] = (),
) -> dict[Hashable, tuple[list[QueryHit], T]]:
    """Per document: every query that found it (at its best rank there), and its first instance."""
    found: dict[Hashable, tuple[list[QueryHit], T]] = {}
    queries = [(QUESTION, 0, question, question_hits)]
    queries += [
        (EXPANSION, n, text, hits)
        for n, (text, hits) in enumerate(zip(expansions, expansion_hits, strict=True), 1)
    ]
    for kind, number, text, hits in queries:
        seen_here: set[Hashable] = set()
        for rank, item in enumerate(hits, start=1):
            item_key = key(item)
            if item_key in seen_here:
                continue
            seen_here.add(item_key)
            found.setdefault(item_key, ([], item))[0].append(QueryHit(kind, number, text, rank))
    anchors = {label: n for n, label in enumerate(dict.fromkeys(label for label, _ in sourced), 1)}
    for rank, (label, item) in enumerate(sourced, start=1):
        item_key = key(item)
        if not any(h.query == PROVENANCE for h in found.get(item_key, ([], item))[0]):
            found.setdefault(item_key, ([], item))[0].append(
                QueryHit(PROVENANCE, anchors[label], label, rank)
            )
    return found


def _unique(items: Sequence[T], key: Callable[[T], Hashable]) -> list[Hashable]:
    seen: dict[Hashable, None] = {}
    for item in items:
        seen.setdefault(key(item), None)
    return list(seen)


DEFAULT_POLICY = ContextPolicy()
"""The policy every integration and ``gravity eval`` use unless given another.

It places no expansion (``every`` 0), so retrieval searches the question and fetches the selected
anchors' source turns by id; the expanded queries are neither embedded nor searched.
"""

EXPANDING_POLICY = ContextPolicy(every=1)
"""The paper's query expansion: :data:`DEFAULT_POLICY` with the expanded queries searched too.

After the question's first ``lead`` (25) hits, every place goes to an expansion's best hit not
placed yet (one per expansion, in the engine's order) until they run out, then to the question's
next hits. It was the default before retrieval by provenance made the expansions' hits add
nothing measurable (see the module doc); pass it (``policy=EXPANDING_POLICY``) for ablations, or
to search the expansions anyway.
"""
