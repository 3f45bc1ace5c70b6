"""``gravity show``: where it writes, what it says, one-line errors."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.core.explorer.conftest import ShownKB, run_cli
from tests.core.explorer.test_payload import page_payload


def test_show_writes_the_page_beside_the_kb_by_default(
    sample_shown: ShownKB, capsys: pytest.CaptureFixture[str]
) -> None:
    default = sample_shown.kb_dir / "anchors.html"
    default.unlink(missing_ok=True)
    code, out, err = run_cli(["show", str(sample_shown.kb_dir)], capsys)
    assert code == 0, err
    kb = sample_shown.kb
    assert err.strip() == (
        f"{default}: {len(kb.entities)} entities, {len(kb.events)} events, {len(kb.topics)} topics"
    )
    assert out == ""
    payload = page_payload(default.read_text(encoding="utf-8"))
    assert payload["title"] == sample_shown.kb_dir.name
    assert payload["stats"]["utterances"] == len(kb.utterances)


def test_show_without_a_kb_fails_in_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = run_cli(["show", str(tmp_path / "nothing"), "-o", str(tmp_path / "a.html")], capsys)
    assert code == 1
    assert err.count("\n") == 1 and err.startswith("gravity: error: ") and "nothing: no such folder" in err
    assert not (tmp_path / "a.html").exists()
    (tmp_path / "empty").mkdir()
    code, _, err = run_cli(["show", str(tmp_path / "empty"), "-o", str(tmp_path / "a.html")], capsys)
    assert code == 1 and err.count("\n") == 1 and "empty/manifest.json: no GRAVITY KB here" in err


def test_show_into_a_folder_fails_in_one_line(
    sample_shown: ShownKB, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, _, err = run_cli(["show", str(sample_shown.kb_dir), "-o", str(tmp_path)], capsys)
    assert code == 1
    assert err.count("\n") == 1 and "is a folder" in err
