"""The many-users guide (docs/guides/many-users.md) runs as written, offline, in a fresh interpreter
(a process pool)."""

from __future__ import annotations

from pathlib import Path

from gravity_core.storage.store import AnchorStore
from tests.readme_sections import python_blocks, run_section, section

PAGE = "docs/guides/many-users.md"
HEADING = "# Many users' KBs at once"


def test_the_many_users_section_runs_offline(tmp_path: Path) -> None:
    assert len(python_blocks(section(HEADING, PAGE))) == 1
    run = run_section(HEADING, tmp_path, page=PAGE)
    assert run.returncode == 0, run.stderr[-3000:]
    lines = run.stdout.splitlines()
    assert lines[0] == "u-1 built 96 "
    assert lines[1] == "u-2 built 40 "
    assert lines[2].startswith("bad id failed 0 user id 'bad id' cannot name a folder")
    assert lines[3] == "['u-1', 'u-2']"
    assert len(AnchorStore(tmp_path / "kbs" / "u-2").load().kb.utterances) == 40
