"""What the commands check before they do any work: the conversation file and the output folder."""

from __future__ import annotations

from pathlib import Path

from gravity_core.errors import ConfigurationError, InputDataError
from gravity_core.loaders import DEFAULT_MAX_INPUT_BYTES, load_conversation
from gravity_core.schema import Utterance

__all__ = ["check_output_folder", "load_input"]


def load_input(
    path: Path, sample: str | None, *, max_bytes: int = DEFAULT_MAX_INPUT_BYTES
) -> list[Utterance]:
    """The utterances of ``path`` (``--sample`` picks a conversation of a benchmark file).

    Raises:
        ConfigurationError: the file holds several conversations and no ``--sample`` was given
            (the message lists their ids).
        InputDataError: see :func:`~gravity_core.loaders.load_conversation`.
    """
    try:
        return load_conversation(path, sample=sample, max_bytes=max_bytes)
    except InputDataError as exc:
        if sample is None and exc.field in ("sample_id", "question_id") and exc.record is None:
            raise ConfigurationError(f"{exc}; build one per folder with --sample ID") from exc
        raise


def check_output_folder(output: Path, what: str) -> None:
    """Refuse an ``-o`` that names a file, before anything is read or created.

    Args:
        output: the ``-o`` path.
        what: what the folder holds, for the message ("KB", "SGMem index").

    Raises:
        ConfigurationError: ``output`` exists and is not a folder.
    """
    if output.exists() and not output.is_dir():
        raise ConfigurationError(
            f"{output}: is not a folder; -o names the {what} folder to create or extend: choose another path"
        )
