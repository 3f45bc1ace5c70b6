"""``gravity sgmem build|query``: build, incremental rebuild, query as text and JSON, errors."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import typer
from typer.testing import CliRunner, Result

from gravity_core.cli.sgmem_cmd import make_sgmem_app
from gravity_core.errors import AnchorStoreError, ConfigurationError
from gravity_core.sgmem import SGMem
from tests.core.sgmem.conftest import LOCOMO, SAMPLE


def gravity(*argv: str) -> Result:
    """Run ``gravity sgmem ...`` as the main app registers it (``add_typer(..., name="sgmem")``)."""
    app = typer.Typer()
    app.add_typer(make_sgmem_app(), name="sgmem")
    return CliRunner().invoke(app, ["sgmem", *argv])


def test_build_then_query_json(tmp_path: Path) -> None:
    index = tmp_path / "idx"
    built = gravity("build", str(SAMPLE), "-o", str(index), "--embedder", "hashing", "--k", "4")
    assert built.exit_code == 0, built.output
    assert "+96 utterances (0 already in the index)" in built.output
    assert SGMem.load(index).graph_config.k == 4
    asked = gravity("query", str(index), "Where did Maya find a flat?", "--json", "--budget", "300")
    assert asked.exit_code == 0, asked.output
    data = json.loads(asked.output)
    assert data["question"] == "Where did Maya find a flat?" and data["memories"] == []
    assert data["results"] and data["tokens"] <= 300
    for item in data["results"]:
        assert {"text", "granularity", "score", "utterance_ids"} <= set(item)
        assert item["granularity"] == "turn"
    rounds = json.loads(gravity("query", str(index), "flat", "--json", "--granularity", "round").output)
    assert all(r["granularity"] == "round" and "/r" in r["id"] for r in rounds["results"])
    text = gravity("query", str(index), "Where did Maya find a flat?", "--max-chunks", "2", "--hops", "0")
    assert text.exit_code == 0 and "# Conversation excerpts" in text.output and "2 turn chunks" in text.output


def test_rebuild_adds_nothing_and_graph_settings_are_fixed(tmp_path: Path) -> None:
    index = tmp_path / "idx"
    assert gravity("build", str(SAMPLE), "-o", str(index), "--embedder", "hashing").exit_code == 0
    again = gravity("build", str(SAMPLE), "-o", str(index))
    assert again.exit_code == 0 and "+0 utterances (96 already in the index)" in again.output
    assert sorted(p.name for p in index.iterdir() if p.name.startswith("g")) == [
        "g000001"
    ]  # nothing rewritten
    changed = gravity("build", str(SAMPLE), "-o", str(index), "--gamma", "0.9")
    assert isinstance(changed.exception, ConfigurationError)


def test_query_of_a_missing_index_fails_clearly(tmp_path: Path) -> None:
    result = gravity("query", str(tmp_path / "none"), "anything")
    assert isinstance(result.exception, AnchorStoreError)
    assert str(result.exception) == f"{tmp_path / 'none'}: no such folder"
    (tmp_path / "empty").mkdir()
    result = gravity("query", str(tmp_path / "empty"), "anything")
    assert isinstance(result.exception, AnchorStoreError)
    assert "manifest.json missing" in str(result.exception)


@pytest.mark.skipif(not LOCOMO.exists(), reason="LoCoMo data not beside the repo")
def test_build_a_locomo_sample(tmp_path: Path) -> None:
    index = tmp_path / "conv26"
    result = gravity("build", str(LOCOMO), "--sample", "conv-26", "-o", str(index), "--embedder", "hashing")
    assert result.exit_code == 0, result.output
    counts = SGMem.load(index).stats()
    assert counts["sessions"] == 19 and counts["turns"] == 419 and counts["sentences"] > 419
