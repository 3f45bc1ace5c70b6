"""The loaders read at most a capped number of bytes (#19: ``gravity build /dev/zero`` died of MemoryError).

Every loader takes ``max_bytes`` (default 512 MiB) and reads at most ``max_bytes + 1`` bytes, so a
file over the cap, ``/dev/zero`` and a FIFO that never ends are all refused with an
:class:`InputDataError` naming the file, the cap and how to raise it; ``gravity build`` has
``--max-input-mb``.
"""

from __future__ import annotations

import os
import resource
import subprocess
import sys
import threading
from collections.abc import Callable
from pathlib import Path

import pytest

from gravity_core.cli import main
from gravity_core.errors import ConfigurationError, InputDataError
from gravity_core.loaders import (
    DEFAULT_MAX_INPUT_BYTES,
    load_conversation,
    load_locomo,
    load_longmemeval,
    load_utterances,
    locomo_sample_ids,
)

TESTS = Path(__file__).resolve().parents[2]
FIXTURES = TESTS / "fixtures"
SAMPLE = TESTS.parent / "examples" / "sample_conversation.jsonl"
MIB = 1024 * 1024


def load_locomo_demo_1(path: Path, **kwargs: int) -> object:
    """``load_locomo`` of one sample: the tiny file holds two, which only load one at a time."""
    return load_locomo(path, "demo-1", **kwargs)


def load_longmemeval_q_001(path: Path, **kwargs: int) -> object:
    """``load_longmemeval`` of one instance: the tiny file holds two, which only load one at a time."""
    return load_longmemeval(path, "q_001", **kwargs)


LOADERS: list[tuple[Path, Callable[..., object]]] = [
    (FIXTURES / "utterances.jsonl", load_conversation),
    (FIXTURES / "utterances.jsonl", load_utterances),
    (FIXTURES / "locomo_tiny.json", load_locomo_demo_1),
    (FIXTURES / "locomo_tiny.json", locomo_sample_ids),
    (FIXTURES / "longmemeval_tiny.json", load_longmemeval_q_001),
]


def _limit_memory() -> None:
    """In the child: 3 GiB of address space, so reading without a cap fails fast, not eating the host."""
    resource.setrlimit(resource.RLIMIT_AS, (3 * 1024**3, 3 * 1024**3))


def test_the_default_cap_is_512_mib() -> None:
    assert DEFAULT_MAX_INPUT_BYTES == 512 * MIB


@pytest.mark.skipif(not Path("/dev/zero").exists(), reason="needs /dev/zero")
def test_building_dev_zero_exits_with_one_line_and_no_traceback(tmp_path: Path) -> None:
    """With the default cap: 512 MiB + 1 byte are read, then the build stops (it used to read forever)."""
    result = subprocess.run(
        [sys.executable, "-m", "gravity_core", "build", "/dev/zero", "-o", str(tmp_path / "kb")],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        timeout=300,
        preexec_fn=_limit_memory,
    )
    assert result.returncode == 1, result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith("gravity: error: file /dev/zero: larger than the input cap of 512 MiB")
    assert "--max-input-mb" in lines[0]
    assert "Traceback" not in result.stderr and "MemoryError" not in result.stderr
    assert not (tmp_path / "kb").exists()


def test_an_endless_fifo_stops_at_the_cap(tmp_path: Path) -> None:
    fifo = tmp_path / "stream.jsonl"
    os.mkfifo(fifo)
    stop = threading.Event()

    def write_forever() -> None:
        chunk = b" " * 65536
        try:
            with fifo.open("wb") as handle:
                while not stop.is_set():
                    handle.write(chunk)
        except BrokenPipeError:
            pass  # the reader closed the pipe: what the cap is for

    writer = threading.Thread(target=write_forever, daemon=True)
    writer.start()
    try:
        with pytest.raises(InputDataError, match=r"larger than the input cap of 1 MiB"):
            load_conversation(fifo, max_bytes=MIB)
    finally:
        stop.set()
        writer.join(timeout=10)
    assert not writer.is_alive()


@pytest.mark.parametrize(("path", "loader"), LOADERS, ids=lambda v: getattr(v, "__name__", str(v)))
def test_every_loader_refuses_a_file_over_its_cap_and_loads_it_under_a_raised_one(
    path: Path, loader: Callable[..., object]
) -> None:
    size = path.stat().st_size
    with pytest.raises(InputDataError) as refused:
        loader(path, max_bytes=size - 1)
    message = str(refused.value)
    assert refused.value.path == str(path) and message.startswith(f"file {path}:")
    assert f"input cap of {size - 1:,} bytes" in message
    assert "--max-input-mb" in message and "max_bytes=" in message
    assert loader(path, max_bytes=size)  # exactly at the cap: read whole, loaded
    assert loader(path) == loader(path, max_bytes=size)


@pytest.mark.parametrize("bad", [0, -1, True, 1.5])
def test_a_cap_that_is_not_a_positive_int_is_a_configuration_error(bad: object) -> None:
    with pytest.raises(ConfigurationError, match="max_bytes"):
        load_conversation(SAMPLE, max_bytes=bad)  # type: ignore[arg-type]


def test_build_max_input_mb_refuses_then_raising_it_builds(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    big = tmp_path / "padded.jsonl"
    big.write_bytes(SAMPLE.read_bytes() + b"\n" * (MIB + 1))  # blank lines: still a valid JSON Lines file
    kb = tmp_path / "kb"
    argv = ["build", str(big), "-o", str(kb), "--embedder", "hashing", "--quiet"]
    with pytest.raises(SystemExit) as exit_info:
        main([*argv, "--max-input-mb", "1"])
    err = capsys.readouterr().err
    assert exit_info.value.code == 1 and err.count("\n") == 1, err
    assert f"file {big}: larger than the input cap of 1 MiB" in err and "--max-input-mb" in err
    assert not kb.exists()

    with pytest.raises(SystemExit) as exit_info:
        main([*argv, "--max-input-mb", "2"])
        raise SystemExit(0)
    assert exit_info.value.code == 0, capsys.readouterr().err
    assert (kb / "manifest.json").is_file()
