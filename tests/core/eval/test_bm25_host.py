"""The BM25 host: lexical ranking of turns, fetch by turn id, and ``gravity eval --host bm25``."""

from __future__ import annotations

import json
import logging
import sys
from datetime import UTC, datetime
from pathlib import Path

import numpy as np
import pytest
from typer.testing import CliRunner

from gravity_core.cli.eval_cmd import make_eval_app
from gravity_core.errors import ConfigurationError, MissingDependencyError
from gravity_core.eval import bm25_host
from gravity_core.eval.bm25_host import BM25Host, bm25_available, bm25_host_factory
from gravity_core.eval.datasets import load_locomo_eval
from gravity_core.eval.hosts import FetchingHost, Host, render_turn
from gravity_core.eval.settings import HOST_ALONE
from gravity_core.schema import Utterance
from gravity_core.text.tokens import TokenCounter

pytestmark = pytest.mark.skipif(not bm25_available(), reason="bm25s and nltk (the eval extra) are missing")

COUNTER = TokenCounter()


def _turn(index: int, text: str) -> Utterance:
    return Utterance(
        id=f"D1:{index}",
        speaker="Ann",
        text=text,
        session="s1",
        timestamp=datetime(2023, 5, 8, 13, 56, tzinfo=UTC),
    )


def _host(locomo_tiny: Path) -> tuple[BM25Host, list[Utterance]]:
    sample = load_locomo_eval(locomo_tiny)[0]
    return BM25Host(sample.utterances, counter=COUNTER), list(sample.utterances)


def test_bm25_host_meets_both_protocols(locomo_tiny: Path) -> None:
    host, _ = _host(locomo_tiny)
    assert isinstance(host, Host) and isinstance(host, FetchingHost)
    assert host.name == "bm25"


def test_the_turn_sharing_rare_words_ranks_first(locomo_tiny: Path) -> None:
    host, _ = _host(locomo_tiny)
    parrot, lisbon, classes = host.search(["parrot named Kiwi", "Who went to Lisbon?", "classes"], limit=3)
    assert parrot[0].id == "D3:2"  # "parrot" and "Kiwi" (D3:3 has both too but not "named")
    assert {p.id for p in parrot[:2]} == {"D3:2", "D3:3"}
    assert lisbon[0].id in {"D1:4", "D2:1"} and {p.id for p in lisbon[:2]} == {"D1:4", "D2:1"}
    assert classes[0].id == "D2:4"  # "classes" matches "class" only through stemming


def test_ranking_holds_every_turn_up_to_limit_and_is_deterministic(locomo_tiny: Path) -> None:
    host, utterances = _host(locomo_tiny)
    (full,) = host.search(["Kiwi"], limit=200)
    assert len(full) == len(utterances) and len({p.id for p in full}) == len(utterances)
    assert full[0].id in {"D3:2", "D3:3"}
    # The turns without "kiwi" score 0 and follow in conversation order.
    rest = [p for p in full if p.id not in {"D3:2", "D3:3"}]
    assert [p.position for p in rest] == sorted(p.position for p in rest)
    (short,) = host.search(["Kiwi"], limit=5)
    assert [p.id for p in short] == [p.id for p in full[:5]]
    again, _ = _host(locomo_tiny)
    assert [p.id for p in again.search(["Kiwi"], limit=200)[0]] == [p.id for p in full]


def test_equal_scores_keep_conversation_order() -> None:
    turns = [_turn(i, "I like green tea") for i in range(1, 6)]
    host = BM25Host(turns, counter=COUNTER)
    (ranking,) = host.search(["green tea"], limit=10)
    assert [p.id for p in ranking] == [t.id for t in turns]


def test_a_query_without_known_words_ranks_the_conversation_in_order(locomo_tiny: Path) -> None:
    host, utterances = _host(locomo_tiny)
    stopwords_only, unknown, empty = host.search(["the and of", "zeppelin", ""], limit=200)
    in_order = [u.id for u in utterances]
    assert [p.id for p in stopwords_only] == in_order
    assert [p.id for p in unknown] == in_order
    assert [p.id for p in empty] == in_order
    assert not host.scores("zeppelin").any()


def test_vectors_are_ignored_and_an_empty_conversation_ranks_nothing(locomo_tiny: Path) -> None:
    host, _ = _host(locomo_tiny)
    assert host.search([]) == []
    with_vectors = host.search(["parrot"], vectors=np.ones((1, 8), dtype=np.float32))
    assert with_vectors == host.search(["parrot"])
    empty = BM25Host([], counter=COUNTER)
    assert empty.search(["parrot", "bike"]) == [[], []] and empty.fetch(["D1:1"]) == []
    only_stopwords = BM25Host([_turn(1, "a the of"), _turn(2, "and")], counter=COUNTER)
    assert [p.id for p in only_stopwords.search(["the"])[0]] == ["D1:1", "D1:2"]


def test_passages_are_rendered_turns_costed_like_the_vector_host(locomo_tiny: Path) -> None:
    host, utterances = _host(locomo_tiny)
    (ranking,) = host.search(["bike"], limit=200)
    by_id = {u.id: u for u in utterances}
    for passage in ranking:
        turn = by_id[passage.id]
        assert passage.text == render_turn(turn)
        assert passage.tokens == COUNTER.count(passage.text + "\n")
        assert passage.turn_ids == (turn.id,)
        assert passage.position == utterances.index(turn)


def test_fetch_returns_turns_in_id_order_each_once_skipping_unknown(locomo_tiny: Path) -> None:
    host, _ = _host(locomo_tiny)
    fetched = host.fetch(["D3:2", "nope", "D1:1", "D3:2", "D2:3"])
    assert [p.id for p in fetched] == ["D3:2", "D1:1", "D2:3"]
    assert host.fetch([]) == [] and host.fetch(["D9:9"]) == []


def test_speaker_and_session_date_are_searchable(locomo_tiny: Path) -> None:
    host, utterances = _host(locomo_tiny)
    (ranking,) = host.search(["April"], limit=4)  # only session 3 is dated April
    assert {p.id for p in ranking} == {u.id for u in utterances if u.id.startswith("D3:")}


def test_bm25s_logger_follows_the_application_level(locomo_tiny: Path) -> None:
    _host(locomo_tiny)  # bm25s sets its logger to DEBUG on import; the host hands the level back
    assert logging.getLogger("bm25s").level == logging.NOTSET
    assert logging.getLogger("bm25s").getEffectiveLevel() == logging.getLogger().getEffectiveLevel()


def test_missing_bm25s_names_the_eval_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "bm25s", None)
    bm25_host._library.cache_clear()
    try:
        with pytest.raises(MissingDependencyError, match=r"pip install 'gravity-memory\[eval\]'"):
            BM25Host([_turn(1, "hello there")], counter=COUNTER)
        with pytest.raises(ConfigurationError, match="bm25s"):
            bm25_host_factory(counter=COUNTER)
    finally:
        bm25_host._library.cache_clear()


def test_gravity_eval_locomo_with_the_bm25_host(locomo_tiny: Path, tmp_path: Path) -> None:
    out = tmp_path / "run"
    args = ["locomo", str(locomo_tiny), "-o", str(out), "--host", "bm25", "--settings", "full", "--no-plots"]
    fast = ["--embedder", "hashing", "--budgets", "400,800", "--anchor-share", "0.6", "--quiet"]
    result = CliRunner().invoke(make_eval_app(), [*args, *fast], catch_exceptions=False)
    assert result.exit_code == 0, result.output
    data = json.loads((out / "results.json").read_text())
    assert data["info"]["hosts"] == ["bm25"]
    assert {r["host"] for r in data["records"]} == {"bm25"}
    assert {r["setting"] for r in data["records"]} == {HOST_ALONE, "full"}
    assert len(data["records"]) == data["info"]["questions"] * 2 * 2  # 2 settings x 2 budgets
    alone = data["summary"]["bm25"][HOST_ALONE]["800"]["overall"]
    assert alone["evidence_recall"] is not None and alone["evidence_recall"] > 0
    assert "bm25: coverage" in result.output and "bm25+GRAVITY: coverage" in result.output


def test_an_unknown_host_lists_bm25(locomo_tiny: Path, tmp_path: Path) -> None:
    args = ["locomo", str(locomo_tiny), "-o", str(tmp_path / "x"), "--host", "bm26", "--embedder", "hashing"]
    result = CliRunner().invoke(make_eval_app(), [*args, "-q", "--no-plots"])
    assert isinstance(result.exception, ConfigurationError)
    assert "vector, sgmem or bm25" in str(result.exception)
