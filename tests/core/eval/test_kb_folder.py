"""Each evaluated sample gets its own KB folder, inside the run's folder, whatever its id."""

from __future__ import annotations

from pathlib import Path

from gravity_core.embeddings import HashingEmbedder
from gravity_core.eval.kbs import kb_folder
from gravity_core.extract.offline import OfflineExtractor


def test_ids_that_clean_to_the_same_name_get_different_folders(tmp_path: Path) -> None:
    extractor = OfflineExtractor(HashingEmbedder())
    ids = ["a/b", "a_b", "a:b", "..", ".", "", "conv-26"]
    folders = [kb_folder(tmp_path, extractor, sample_id) for sample_id in ids]

    assert len(set(folders)) == len(ids)
    for folder in folders:
        assert folder.resolve().parent.parent == tmp_path.resolve()
        assert folder.name not in {"", ".", ".."}
    assert folders[-1].name == "conv-26"  # ids that are already safe are kept as they are
