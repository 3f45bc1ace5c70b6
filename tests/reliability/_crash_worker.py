"""A build that SIGKILLs itself at a chosen point, run in a subprocess by test_crash_resume.py.

    python -m tests.reliability._crash_worker KB_DIR      # one build, configured by the environment
    python -m tests.reliability._crash_worker --serve     # a fork server for many builds

The fork server imports everything once, then for each JSON request on stdin (``folder``,
``checkpoint``, ``kill``, ``torn``, ``kill_after``, ``journal_only``, ``forget``: a session to
forget from the KB in ``folder`` instead of building; ``sessions``: build only the first ones;
``delta_share``: the store's) forks a child that runs one
build with its stdout and stderr in files, waits for it (SIGKILLing it after ``kill_after``
seconds if given) and answers one JSON line: ``code`` (negative: killed by that signal), ``out``,
``err``, ``seconds``.
Forking saves the interpreter start and imports, which cost several times the build itself.

The build: 5 sessions of 6 turns, 3 turns per batch (10 batches), fused LLM extraction with a fake
model that answers from the prompt alone. Batch S2:1.. answers badly until the retry phase (it
fails, then ``retry_failed`` recovers it), batch S3:1.. always answers badly (it stays in the build
log), and batch S4:4.. answers badly once (one re-ask). After ``add``, ``retry_failed`` runs.

Environment:
    GRAVITY_KILL_AT        ``model:N`` (die when the model is asked its N-th request), ``io:N``
                           (die at the N-th file operation: os.replace, os.fsync, os.write (every
                           byte the store writes), json.dump (the response cache), shutil.rmtree,
                           os.unlink, os.mkdir) or ``OP:N`` (die at the N-th call of that
                           operation, e.g. ``os.write:3``); unset: no kill.
    GRAVITY_KILL_TORN      ``1``: when the N-th operation writes a file (os.write, json.dump),
                           write half of it first (a torn write), then die.
    GRAVITY_CHECKPOINT     batches between checkpoints (default 1).
    GRAVITY_JOURNAL_ONLY   ``1``: every checkpoint goes to the journal (none saves a generation), so
                           kills land in journal appends and resumes replay long journals with
                           patches; the default folds the journal into a generation as the store
                           decides.

Each kill writes ``KILL <kind>:<n> <operation>`` to stderr first. A run that completes prints a
JSON summary: events counted per kind and per operation.

The wrappers pass every call through to the real function; only the fake model stands in for a
real one.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Callable, Sequence
from typing import Any

from gravity_core.build.builder import AnchorBuilder
from gravity_core.embeddings import HashingEmbedder
from gravity_core.extract.llm import LLMExtractor
from gravity_core.llm.base import Message
from gravity_core.llm.cache import ResponseCache
from gravity_core.storage.store import AnchorStore
from gravity_core.testing import FakeChatModel
from tests.reliability._build_helpers import batch_ids, conversation, good_answer

SESSIONS, TURNS, BATCH = 5, 6, 3
RECOVERS, NEVER, ONE_REASK = "S2:1", "S3:1", "S4:4"


class KillSwitch:
    """Counts model requests and file operations; SIGKILLs this process at the chosen one."""

    def __init__(self, plan: str, torn: bool) -> None:
        kind, _, number = plan.partition(":")
        self.kind, self.at = (kind, int(number)) if plan else ("", 0)
        self.torn = torn
        self.counts: Counter[str] = Counter()
        self.ops: Counter[str] = Counter()

    def event(self, kind: str, op: str, torn_write: Callable[[], None] | None = None) -> None:
        self.counts[kind] += 1
        self.ops[op] += 1
        if (kind == self.kind and self.counts[kind] == self.at) or (
            op == self.kind and self.ops[op] == self.at
        ):
            torn = self.torn and torn_write is not None
            sys.stderr.write(f"KILL {kind}:{self.at} {op}{' torn' if torn else ''}\n")
            sys.stderr.flush()
            if torn and torn_write is not None:
                torn_write()
            os.kill(os.getpid(), signal.SIGKILL)

    def install(self) -> None:
        """Wrap the file operations the store and the response cache use."""

        def passthrough(module: Any, name: str) -> None:
            real = getattr(module, name)

            def wrapper(*args: Any, **kwargs: Any) -> Any:
                self.event("io", f"{module.__name__}.{name}")
                return real(*args, **kwargs)

            setattr(module, name, wrapper)

        for module, name in (
            (os, "replace"),
            (os, "fsync"),
            (os, "unlink"),
            (shutil, "rmtree"),
            (os, "mkdir"),  # the staging folder of a save (gravity_core.storage.files.new_temp_dir)
            (os, "link"),  # a delta generation's links to its base's files
        ):
            passthrough(module, name)

        real_dump, real_write = json.dump, os.write

        def dump(obj: Any, fp: Any, **kwargs: Any) -> None:
            def torn() -> None:
                text = json.dumps(obj, **kwargs)
                fp.write(text[: len(text) // 2])
                fp.flush()

            self.event("io", "json.dump", torn)
            real_dump(obj, fp, **kwargs)

        def write(fd: int, data: Any) -> int:
            def torn() -> None:
                view = memoryview(data)
                real_write(fd, view[: view.nbytes // 2])

            self.event("io", "os.write", torn)
            return real_write(fd, data)

        json.dump = dump
        os.write = write


def fake_answer(switch: KillSwitch, phase: dict[str, str]) -> Callable[[Sequence[Message]], str]:
    def answer(messages: Sequence[Message]) -> str:
        switch.event("model", "model.complete")
        first = batch_ids(messages)[0]
        reask = len(messages) > 2
        if first == NEVER or (first == RECOVERS and phase["name"] == "add"):
            return "I would rather not answer in JSON."
        if first == ONE_REASK and not reask:
            return good_answer(messages)[:40]  # truncated
        return good_answer(messages)

    return answer


def build(
    folder: str,
    checkpoint: int,
    kill: str,
    torn: bool,
    journal_only: bool = False,
    sessions: int = SESSIONS,
    delta_share: float | None = None,
) -> None:
    """One build, killed as planned; prints the event counts if it completes."""
    if journal_only:
        AnchorStore.journal_outgrows_generation = lambda self, end: False  # type: ignore[method-assign]
    switch = KillSwitch(kill, torn)
    switch.install()
    phase = {"name": "add"}
    store = AnchorStore(folder) if delta_share is None else AnchorStore(folder, delta_share=delta_share)
    model = FakeChatModel(fake_answer(switch, phase), model_name="fake-per-prompt")
    builder = AnchorBuilder(
        LLMExtractor(model, fused=True, cache=ResponseCache(store.cache_dir)),
        HashingEmbedder(dim=32),
        batch_size=BATCH,
        store=store,
        checkpoint_every=checkpoint,
    )
    builder.add(conversation(sessions=sessions, turns=TURNS))
    phase["name"] = "retry"
    builder.retry_failed()
    sys.stdout.write(json.dumps({"counts": dict(switch.counts), "ops": dict(switch.ops)}) + "\n")


def forget(folder: str, kill: str, torn: bool, session: str) -> None:
    """Forget ``session`` from the KB in ``folder`` (built by :func:`build`), killed as planned."""
    from gravity_core.build.forget import ForgetRequest

    switch = KillSwitch(kill, torn)
    switch.install()
    store = AnchorStore(folder)
    model = FakeChatModel(fake_answer(switch, {"name": "retry"}), model_name="fake-per-prompt")
    builder = AnchorBuilder(
        LLMExtractor(model, fused=True, cache=ResponseCache(store.cache_dir)),
        HashingEmbedder(dim=32),
        batch_size=BATCH,
        store=store,
    )
    builder.forget(ForgetRequest(sessions=(session,)))
    sys.stdout.write(json.dumps({"counts": dict(switch.counts), "ops": dict(switch.ops)}) + "\n")


def _run_child(request: dict[str, Any], out_path: str, err_path: str) -> int:
    """Fork one build; returns its wait status code (negative: the signal that ended it)."""
    pid = os.fork()
    if pid == 0:  # the child: never returns
        code = 0
        try:
            for fd, path in ((1, out_path), (2, err_path)):
                target = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC)
                os.dup2(target, fd)
                os.close(target)
            kill, torn = request.get("kill", ""), request.get("torn", False)
            if request.get("forget"):
                forget(request["folder"], kill, torn, request["forget"])
            else:
                build(
                    request["folder"],
                    request["checkpoint"],
                    kill,
                    torn,
                    request.get("journal_only", False),
                    request.get("sessions") or SESSIONS,
                    request.get("delta_share"),
                )
        except BaseException:
            import traceback

            traceback.print_exc()
            code = 1
        finally:
            sys.stdout.flush()
            sys.stderr.flush()
            os._exit(code)
    deadline = request.get("kill_after")
    if deadline is not None:
        end = time.monotonic() + deadline
        while time.monotonic() < end:
            done, status = os.waitpid(pid, os.WNOHANG)
            if done:
                return os.waitstatus_to_exitcode(status)
            time.sleep(0.002)
        os.kill(pid, signal.SIGKILL)
    _, status = os.waitpid(pid, 0)
    return os.waitstatus_to_exitcode(status)


def serve() -> None:
    """Answer build requests from stdin, one JSON line each, until stdin closes."""
    scratch = tempfile.mkdtemp(prefix="crash-worker-")
    out_path, err_path = os.path.join(scratch, "out"), os.path.join(scratch, "err")
    for line in sys.stdin:
        request = json.loads(line)
        start = time.monotonic()
        code = _run_child(request, out_path, err_path)
        seconds = time.monotonic() - start
        with open(out_path) as out, open(err_path) as err:
            answer = {"code": code, "out": out.read(), "err": err.read(), "seconds": seconds}
        sys.stdout.write(json.dumps(answer) + "\n")
        sys.stdout.flush()
    shutil.rmtree(scratch, ignore_errors=True)


if __name__ == "__main__":
    if sys.argv[1:] == ["--serve"]:
        serve()
    else:
        build(
            sys.argv[1],
            int(os.environ.get("GRAVITY_CHECKPOINT", "1")),
            os.environ.get("GRAVITY_KILL_AT", ""),
            os.environ.get("GRAVITY_KILL_TORN") == "1",
            os.environ.get("GRAVITY_JOURNAL_ONLY") == "1",
        )
