"""Start a local Chroma server (``chroma run``) for a recipe, and stop it afterwards."""

from __future__ import annotations

import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@contextmanager
def running_chroma(folder: Path, timeout: float = 30.0) -> Iterator[tuple[str, int]]:
    """``(host, port)`` of a ``chroma run`` server storing its data in ``folder``, until the block ends.

    Raises:
        RuntimeError: no ``chroma`` executable (install the ``chroma`` extra), or the server does not
            answer its heartbeat within ``timeout`` seconds (the message holds its log).
    """
    beside_python = Path(sys.executable).parent / "chroma"
    executable = str(beside_python) if beside_python.exists() else shutil.which("chroma")
    if executable is None:
        raise RuntimeError("no `chroma` executable: pip install 'gravity-memory[chroma]'")
    host, port = "127.0.0.1", _free_port()
    folder.mkdir(parents=True, exist_ok=True)
    log = folder / "chroma.log"
    with log.open("wb") as out:
        process = subprocess.Popen(
            [executable, "run", "--path", str(folder / "db"), "--host", host, "--port", str(port)],
            stdout=out,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
        )
    try:
        deadline = time.monotonic() + timeout
        while True:
            try:
                with urllib.request.urlopen(f"http://{host}:{port}/api/v2/heartbeat", timeout=1.0):
                    break
            except OSError:
                if process.poll() is not None or time.monotonic() > deadline:
                    tail = log.read_text(encoding="utf-8", errors="replace")[-2000:]
                    raise RuntimeError(f"the Chroma server did not start:\n{tail}") from None
                time.sleep(0.1)
        yield host, port
    finally:
        if process.poll() is None:
            process.send_signal(signal.SIGTERM)
            try:
                process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait(timeout=10)
