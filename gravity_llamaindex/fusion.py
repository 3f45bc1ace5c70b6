"""Reciprocal-rank fusion and the context policy's merge, for LlamaIndex nodes.

The rules themselves live in :mod:`gravity_core.context`; this module gives them LlamaIndex's node
type: the key of a node, the host's score of a merged node (also of one fetched by provenance), and a
copy of the node that says why it is there.
"""

from __future__ import annotations

from collections.abc import Sequence

from llama_index.core.schema import NodeWithScore

from gravity_core.context.fusion import DEFAULT_RRF_C
from gravity_core.context.fusion import reciprocal_rank_fusion as core_rrf
from gravity_core.context.policy import MergedHit

__all__ = ["explained_node", "explained_nodes", "host_score", "node_id", "reciprocal_rank_fusion"]


def node_id(item: NodeWithScore) -> str:
    """What makes two results the same node: its ``node_id``."""
    return item.node.node_id


def reciprocal_rank_fusion(
    results: Sequence[Sequence[NodeWithScore]], *, c: int = DEFAULT_RRF_C, top_n: int | None = None
) -> list[NodeWithScore]:
    """Fuse ranked lists: each node scores ``sum(1 / (c + rank))`` over the lists it appears in.

    Store scores are ignored, because their direction and scale differ by backend (Chroma reports
    ``exp(-distance)``, others cosine). Nodes are deduplicated by ``node_id``; ties keep the order in
    which nodes were first met, so the earlier lists (the original question first) win them.

    Args:
        results: one ranked list per search, best first.
        c: the RRF constant; larger values flatten the difference between ranks.
        top_n: how many fused nodes to return (all when ``None``).

    Returns:
        New ``NodeWithScore`` objects (the inputs are not modified) with the fused score, best first.
    """
    fused = core_rrf(results, node_id, c=c, top_n=top_n)
    return [NodeWithScore(node=item.node, score=score) for item, score in fused]


def _searched_score(
    hit: MergedHit[NodeWithScore], results: Sequence[Sequence[NodeWithScore]]
) -> float | None:
    """The host's score of the hit from the searches that found it (``None``: none gave one)."""
    found = tuple(f for f in hit.found_by if f.query != "provenance")  # a fetch by id has no score
    if hit.slot == "question":
        found = tuple(f for f in found if f.query == "question") or found
    scores = [results[f.index][f.rank - 1].score for f in found]
    given = [float(s) for s in scores if s is not None]
    return max(given) if given else None


def host_score(hit: MergedHit[NodeWithScore], results: Sequence[Sequence[NodeWithScore]]) -> float:
    """The host's score of the hit: the question's for a question place, else the best of its searches.

    ``results[0]`` is the question's list, ``results[n]`` expansion ``n``'s; ``found_by`` gives each
    query's number and the node's rank (from 1) in its list (a fetch by provenance is no search and
    gives no score). The fused score stands in when no search gave one.
    """
    searched = _searched_score(hit, results)
    return hit.score if searched is None else searched


def explained_nodes(
    merged: Sequence[MergedHit[NodeWithScore]], results: Sequence[Sequence[NodeWithScore]]
) -> list[NodeWithScore]:
    """The merged nodes, each an :func:`explained_node` with its :func:`host_score`.

    A node fetched by provenance that no search found has no score of the host's: it takes the
    score of the node placed just before it (the place it holds), so a similarity cutoff keeps it
    exactly when it keeps that node; placed first, it has its fused score.
    """
    explained: list[NodeWithScore] = []
    for hit in merged:
        score = _searched_score(hit, results)
        if score is None:
            before = explained[-1].score if explained else None
            score = before if hit.slot == "provenance" and before is not None else hit.score
        explained.append(explained_node(hit, score))
    return explained


def explained_node(hit: MergedHit[NodeWithScore], score: float) -> NodeWithScore:
    """A copy of the hit's node carrying why it is there (not shown to the LLM or the embedder)."""
    node = hit.item.node
    why = hit.metadata()
    copy = node.model_copy(
        update={
            "metadata": {**node.metadata, **why},
            "excluded_llm_metadata_keys": list(dict.fromkeys([*node.excluded_llm_metadata_keys, *why])),
            "excluded_embed_metadata_keys": list(dict.fromkeys([*node.excluded_embed_metadata_keys, *why])),
        }
    )
    return NodeWithScore(node=copy, score=score)
