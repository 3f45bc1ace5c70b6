"""Hosts: turn rendering, vector ranking, the embedding cache, and SGMem as a second host."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import numpy as np
import pytest

from gravity_core.embeddings import HashingEmbedder
from gravity_core.eval.datasets import load_locomo_eval
from gravity_core.eval.embedding_cache import EmbeddingCache
from gravity_core.eval.hosts import FetchingHost, Host, VectorHost, render_turn, session_label
from gravity_core.eval.sgmem_host import SGMemHost, sgmem_available
from gravity_core.schema import Utterance
from gravity_core.text.tokens import TokenCounter

COUNTER = TokenCounter()


def test_session_label_is_locomo_style() -> None:
    assert session_label(datetime(2023, 5, 8, 13, 56, tzinfo=UTC)) == "1:56 pm on 8 May, 2023"
    assert session_label(datetime(2023, 5, 8, 0, 6, tzinfo=UTC)) == "12:06 am on 8 May, 2023"


def test_render_turn_has_date_speaker_text_and_attachments() -> None:
    turn = Utterance(
        id="D1:1",
        speaker="Ben",
        text="Here is the tram.",
        session="s1",
        timestamp=datetime(2023, 3, 14, 16, 30, tzinfo=UTC),
        attachments=["photo: a yellow tram"],
    )
    assert (
        render_turn(turn)
        == "[4:30 pm on 14 March, 2023] Ben: Here is the tram. [shared: photo: a yellow tram]"
    )


def test_vector_host_ranks_the_matching_turn_first(locomo_tiny: Path) -> None:
    sample = load_locomo_eval(locomo_tiny)[0]
    host = VectorHost(sample.utterances, HashingEmbedder(), counter=COUNTER)
    assert isinstance(host, Host)
    (ranking,) = host.search(["parrot named Kiwi"], limit=3)
    assert ranking[0].id == "D3:2" and len(ranking) == 3
    assert ranking[0].tokens == COUNTER.count(ranking[0].text + "\n")


def test_embedding_cache_embeds_a_list_once(tmp_path: Path) -> None:
    first = EmbeddingCache(tmp_path, HashingEmbedder())
    matrix = first.embed(["a red bike", "a parrot"])
    second = EmbeddingCache(tmp_path, HashingEmbedder())
    assert np.array_equal(second.embed(["a red bike", "a parrot"]), matrix)
    assert first.computed == 2 and second.computed == 0
    other = EmbeddingCache(tmp_path, HashingEmbedder(dim=64))
    assert other.key(["a red bike", "a parrot"]) != first.key(["a red bike", "a parrot"])


def test_corrupt_embedding_file_is_recomputed(tmp_path: Path) -> None:
    cache = EmbeddingCache(tmp_path, HashingEmbedder())
    cache.embed(["x"])
    (path,) = tmp_path.glob("*.npy")
    path.write_bytes(b"not numpy")
    again = EmbeddingCache(tmp_path, HashingEmbedder())
    assert again.embed(["x"]).shape == (1, HashingEmbedder().dim) and again.computed == 1


@pytest.mark.skipif(not sgmem_available(), reason="gravity_core.sgmem is not part of this installation")
def test_sgmem_host_ranks_turns_and_is_saved_for_reruns(locomo_tiny: Path, tmp_path: Path) -> None:
    sample = load_locomo_eval(locomo_tiny)[0]
    host = SGMemHost(sample.utterances, HashingEmbedder(), counter=COUNTER, directory=tmp_path / "sg")
    assert isinstance(host, Host) and host.name == "sgmem"
    (ranking,) = host.search(["parrot named Kiwi"], limit=50)
    assert "D3:2" in [p.id for p in ranking[:3]]
    assert len(ranking) == len(sample.utterances)  # deep enough to fill any budget
    reloaded = SGMemHost(sample.utterances, HashingEmbedder(), counter=COUNTER, directory=tmp_path / "sg")
    assert [p.id for p in reloaded.search(["parrot named Kiwi"], limit=50)[0]] == [p.id for p in ranking]


def test_vector_host_fetches_turns_by_id_in_the_ids_order(locomo_tiny: Path) -> None:
    sample = load_locomo_eval(locomo_tiny)[0]
    host = VectorHost(sample.utterances, HashingEmbedder(), counter=COUNTER)
    assert isinstance(host, FetchingHost)
    ids = [sample.utterances[3].id, "no-such-turn", sample.utterances[0].id, sample.utterances[3].id]
    fetched = host.fetch(ids)
    assert [p.id for p in fetched] == [sample.utterances[3].id, sample.utterances[0].id]
    assert fetched[0].text == render_turn(sample.utterances[3])


@pytest.mark.skipif(not sgmem_available(), reason="gravity_core.sgmem is not part of this installation")
def test_sgmem_host_fetches_the_chunk_holding_each_turn(locomo_tiny: Path) -> None:
    sample = load_locomo_eval(locomo_tiny)[0]
    first, second = sample.utterances[0], sample.utterances[1]
    turns = SGMemHost(sample.utterances, HashingEmbedder(), counter=COUNTER)
    assert [p.turn_ids for p in turns.fetch([second.id, "nope", first.id])] == [(second.id,), (first.id,)]
    sessions = SGMemHost(sample.utterances, HashingEmbedder(), counter=COUNTER, granularity="session")
    (whole,) = sessions.fetch([second.id, first.id])  # one session holds both: fetched once
    session_turns = [u.id for u in sample.utterances if u.session == first.session]
    assert list(whole.turn_ids) == session_turns
    # The same chunk found by search and by id is one passage (the merge dedupes by id).
    (ranking,) = sessions.search([first.text], limit=5)
    assert whole in ranking
