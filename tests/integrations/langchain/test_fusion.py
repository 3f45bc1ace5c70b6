"""Reciprocal-rank fusion: order, ties, deduplication, k."""

from __future__ import annotations

import pytest
from langchain_core.documents import Document

from gravity_core.errors import ConfigurationError
from gravity_langchain import document_key, reciprocal_rank_fusion


def doc(name: str, *, with_id: bool = True) -> Document:
    return Document(page_content=f"text {name}", id=name if with_id else None)


def names(documents: list[Document]) -> list[str]:
    return [d.page_content.removeprefix("text ") for d in documents]


def test_a_document_found_by_several_queries_beats_one_found_first_by_one() -> None:
    original = [doc("a"), doc("b"), doc("c")]
    expansion_1 = [doc("c"), doc("d")]
    expansion_2 = [doc("d"), doc("c")]
    # c: 1/63 + 1/61 + 1/62; d: 1/62 + 1/61; a: 1/61; b: 1/62
    assert names(reciprocal_rank_fusion([original, expansion_1, expansion_2])) == ["c", "d", "a", "b"]


def test_scores_follow_the_formula_with_the_constant() -> None:
    # With c=0, rank 1 in one list (1.0) beats ranks 2 and 3 in two lists (0.5 + 0.333).
    lists = [[doc("a"), doc("b")], [doc("x"), doc("y"), doc("b")]]
    assert names(reciprocal_rank_fusion(lists, c=0)) == ["a", "x", "b", "y"]
    # With a large c the ranks flatten out and appearing twice wins.
    assert names(reciprocal_rank_fusion(lists, c=1000))[0] == "b"


def test_ties_keep_the_original_query_first_then_earlier_lists() -> None:
    lists = [[doc("q1"), doc("q2")], [doc("e1"), doc("e2")], [doc("f1")]]
    assert names(reciprocal_rank_fusion(lists)) == ["q1", "e1", "f1", "q2", "e2"]


def test_duplicates_by_id_are_merged_and_the_first_copy_is_kept() -> None:
    first = Document(page_content="original wording", id="same")
    second = Document(page_content="other wording", id="same")
    fused = reciprocal_rank_fusion([[first], [second, doc("z")]])
    assert [d.id for d in fused] == ["same", "z"]
    assert fused[0] is first


def test_documents_without_id_are_deduplicated_by_text() -> None:
    lists = [[doc("a", with_id=False), doc("b", with_id=False)], [doc("b", with_id=False)]]
    fused = reciprocal_rank_fusion(lists)
    assert names(fused) == ["b", "a"]
    assert document_key(doc("a", with_id=False)) == document_key(Document(page_content="text a"))
    assert document_key(doc("a")) != document_key(doc("a", with_id=False))


def test_a_list_that_repeats_a_document_counts_it_once() -> None:
    # c=0: a at ranks 2, 3, 4 would score 1/2 + 1/3 + 1/4 > 1 and come first; counted once it scores 1/2.
    lists = [[doc("x"), doc("a"), doc("a"), doc("a")], [doc("z")]]
    assert names(reciprocal_rank_fusion(lists, c=0)) == ["x", "z", "a"]


def test_top_n_cuts_the_fused_list() -> None:
    lists = [[doc(str(i)) for i in range(5)], [doc(str(i)) for i in range(5, 10)]]
    assert len(reciprocal_rank_fusion(lists, top_n=3)) == 3
    assert len(reciprocal_rank_fusion(lists, top_n=50)) == 10
    assert reciprocal_rank_fusion([], top_n=3) == []


@pytest.mark.parametrize(("top_n", "c"), [(0, 60), (-1, 60), (3, -1)])
def test_bad_arguments_are_configuration_errors(top_n: int, c: int) -> None:
    with pytest.raises(ConfigurationError):
        reciprocal_rank_fusion([[doc("a")]], top_n=top_n, c=c)


def test_both_integrations_fuse_with_the_same_arguments_and_constant() -> None:
    """The same signature (c: the constant, top_n: how many) and the same default, from gravity_core."""
    import inspect

    pytest.importorskip("llama_index.core")
    from gravity_core.context import ContextPolicy
    from gravity_core.context.fusion import DEFAULT_RRF_C
    from gravity_llamaindex import reciprocal_rank_fusion as llamaindex_rrf

    for fuse in (reciprocal_rank_fusion, llamaindex_rrf):
        parameters = inspect.signature(fuse).parameters
        assert list(parameters)[1:] == ["c", "top_n"]
        assert parameters["c"].default == DEFAULT_RRF_C == ContextPolicy().rrf_c
