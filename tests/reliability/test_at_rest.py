"""Nothing unsafe at rest: KBs are JSON and ``.npy`` only, and input never picks where files go.

- The library never deserializes with pickle, marshal, shelve, eval/exec or ``yaml.load``, and every
  ``np.load`` passes ``allow_pickle=False`` (checked on the source, by AST).
- A KB folder (offline and LLM builds, with the model cache) and an SGMem folder hold only ``.json``
  files that parse and ``.npy`` files that load with ``allow_pickle=False`` and a numeric dtype.
- Ids, names and sessions from the input that look like paths (``../../x``, ``/abs``, ``..``) never
  make a write outside the output folder: the CLI builds (GRAVITY and SGMem), the LLM cache and an
  evaluation run are watched for every file they create.
"""

from __future__ import annotations

import ast
import json
import os
import uuid
from collections.abc import Iterator, Sequence
from datetime import UTC, datetime, timedelta
from pathlib import Path

import numpy as np
import pytest

from gravity_core.build import AnchorBuilder
from gravity_core.cli import main
from gravity_core.embeddings import HashingEmbedder
from gravity_core.extract.llm import LLMExtractor
from gravity_core.llm.base import Message
from gravity_core.llm.cache import ResponseCache
from gravity_core.schema import Utterance
from gravity_core.sgmem import SGMem
from gravity_core.storage.store import WRITER_LOCK, AnchorStore
from gravity_core.testing import FakeChatModel

REPO = Path(__file__).resolve().parents[2]
PACKAGES = [REPO / name for name in ("gravity_core", "gravity_langchain", "gravity_llamaindex")]
SAMPLE = REPO / "examples" / "sample_conversation.jsonl"

# ----- the source: no unsafe deserialization ----------------------------------------------------------

UNSAFE_MODULES = {"pickle", "cPickle", "_pickle", "dill", "cloudpickle", "shelve", "marshal", "joblib"}
UNSAFE_CALLS = {"eval", "exec", "__import__"}
UNSAFE_ATTRIBUTES = {
    ("yaml", "load"),
    ("yaml", "unsafe_load"),
    ("yaml", "full_load"),
    ("torch", "load"),
    ("pd", "read_pickle"),
    ("pandas", "read_pickle"),
}


def _sources() -> Iterator[Path]:
    for package in PACKAGES:
        yield from sorted(package.rglob("*.py"))


def _unsafe_uses(path: Path) -> list[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    found: list[str] = []
    for node in ast.walk(tree):
        where = f"{path.name}:{getattr(node, 'lineno', 0)}"
        if isinstance(node, ast.Import):
            found += [
                f"{where} import {a.name}" for a in node.names if a.name.split(".")[0] in UNSAFE_MODULES
            ]
        elif isinstance(node, ast.ImportFrom) and (node.module or "").split(".")[0] in UNSAFE_MODULES:
            found.append(f"{where} from {node.module} import")
        elif isinstance(node, ast.Call):
            func = node.func
            if isinstance(func, ast.Name) and func.id in UNSAFE_CALLS:
                found.append(f"{where} {func.id}()")
            elif isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name):
                pair = (func.value.id, func.attr)
                if pair in UNSAFE_ATTRIBUTES:
                    found.append(f"{where} {pair[0]}.{pair[1]}()")
                if func.attr == "load" and func.value.id in ("np", "numpy"):
                    safe = any(
                        k.arg == "allow_pickle"
                        and isinstance(k.value, ast.Constant)
                        and k.value.value is False
                        for k in node.keywords
                    )
                    if not safe:
                        found.append(f"{where} np.load without allow_pickle=False")
    return found


def test_the_checker_finds_what_it_looks_for(tmp_path: Path) -> None:
    bad = tmp_path / "bad.py"
    bad.write_text(
        "import pickle\nfrom marshal import loads\nimport numpy as np\nimport yaml\n"
        "eval('1')\nnp.load('x.npy')\nnp.load('y.npy', allow_pickle=True)\nyaml.load(s)\n"
        "np.load('z.npy', allow_pickle=False)\n"
    )
    assert _unsafe_uses(bad) == [
        "bad.py:1 import pickle",
        "bad.py:2 from marshal import",
        "bad.py:5 eval()",
        "bad.py:6 np.load without allow_pickle=False",
        "bad.py:7 np.load without allow_pickle=False",
        "bad.py:8 yaml.load()",
    ]


def test_the_library_never_deserializes_unsafely() -> None:
    sources = list(_sources())
    assert len(sources) > 50
    found = [use for path in sources for use in _unsafe_uses(path)]
    assert found == []


# ----- the KB on disk: JSON and .npy only ------------------------------------------------------------


def assert_json_and_npy_only(folder: Path) -> dict[str, int]:
    """Every file under ``folder`` is JSON that parses or a numeric ``.npy`` without pickles."""
    counts = {".json": 0, ".npy": 0}
    for path in sorted(p for p in folder.rglob("*") if p.is_file()):
        if path.name == WRITER_LOCK:  # the builders' file lock: always empty
            assert path.stat().st_size == 0
            continue
        assert path.suffix in counts, f"unexpected file {path.relative_to(folder)}"
        counts[path.suffix] += 1
        if path.suffix == ".json":
            json.loads(path.read_text(encoding="utf-8"))
        else:
            array = np.load(path, allow_pickle=False)
            assert array.dtype.kind in "fiub", f"{path}: dtype {array.dtype}"
    return counts


def snapshot(folder: Path) -> set[Path]:
    return {p for p in folder.rglob("*")}


def cli(argv: Sequence[str], capsys: pytest.CaptureFixture[str]) -> str:
    with pytest.raises(SystemExit) as exit_info:
        main(list(argv))
        raise SystemExit(0)
    err = capsys.readouterr().err
    assert exit_info.value.code == 0, err
    return err


# Path-like input: relative escapes, absolute paths, dot names, separators of both kinds.
MARK = uuid.uuid4().hex[:8]
ESCAPES = [
    f"../../escape-{MARK}",
    f"/tmp/escape-{MARK}",
    "..",
    ".",
    f"..\\..\\escape-{MARK}",
    f"a/b/../../../escape-{MARK}",
    f"~/escape-{MARK}",
]


def hostile_utterances() -> list[Utterance]:
    start = datetime(2024, 3, 1, 10, tzinfo=UTC)
    lines = [
        "I moved to Bristol and started at Harbourside hospital.",
        "We adopted a terrier called Biscuit.",
        "Jonas ran the Bath half marathon.",
    ]
    return [
        Utterance(
            id=escape,
            speaker=escape if n % 2 else "Maya",
            text=lines[n % len(lines)],
            session=ESCAPES[n % 3],
            timestamp=start + timedelta(days=n % 3, minutes=n),
        )
        for n, escape in enumerate(ESCAPES)
    ]


def write_jsonl(path: Path, utterances: Sequence[Utterance]) -> Path:
    path.write_text(
        "\n".join(json.dumps(u.model_dump(mode="json"), ensure_ascii=False) for u in utterances),
        encoding="utf-8",
    )
    return path


def assert_no_escape_outside(root: Path) -> None:
    """Nothing named after the hostile input appeared above the test folder or in /tmp or ~."""
    for base in {root.parent, root.parent.parent, Path("/tmp"), Path.home()}:
        for entry in base.iterdir() if base.is_dir() else ():
            assert MARK not in entry.name, entry


@pytest.fixture
def workdir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A working directory two levels down, so relative escapes have somewhere to land."""
    work = tmp_path / "a" / "work"
    work.mkdir(parents=True)
    monkeypatch.chdir(work)
    return work


def test_cli_build_writes_only_inside_the_kb_folder(
    tmp_path: Path, workdir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    source = write_jsonl(workdir / "hostile.jsonl", hostile_utterances())
    before = snapshot(tmp_path)
    cli(["build", str(source), "-o", "kb", "--embedder", "hashing", "--quiet"], capsys)
    created = snapshot(tmp_path) - before
    kb = workdir / "kb"
    assert created and all(p == kb or kb in p.parents for p in created), sorted(created - {kb})
    counts = assert_json_and_npy_only(kb)
    assert counts[".json"] >= 7 and counts[".npy"] >= 3
    stored = json.loads(next(kb.glob("g*/utterances.json")).read_text(encoding="utf-8"))
    assert set(ESCAPES) <= _ids(stored)  # the ids are kept as data
    assert_no_escape_outside(tmp_path)


def _ids(stored: object) -> set[str]:
    if isinstance(stored, dict):
        return set(stored) | {v["id"] for v in stored.values() if isinstance(v, dict) and "id" in v}
    return {u["id"] for u in stored}  # type: ignore[union-attr]


def test_locomo_sample_id_and_dia_ids_do_not_pick_paths(
    tmp_path: Path, workdir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    sample_id = f"../../../escape-{MARK}"
    turns = [
        {"speaker": "Ada", "dia_id": escape, "text": "I finished the bookshelf."} for escape in ESCAPES[:4]
    ]
    locomo = [
        {
            "sample_id": sample_id,
            "conversation": {"session_1": turns, "session_1_date_time": "9:15 am on 2 March, 2023"},
        }
    ]
    source = workdir / "locomo.json"
    source.write_text(json.dumps(locomo), encoding="utf-8")
    before = snapshot(tmp_path)
    cli(["build", str(source), "--sample", sample_id, "-o", "kb", "--embedder", "hashing", "-q"], capsys)
    cli(["build", str(source), "-o", "kb-all", "--embedder", "hashing", "-q"], capsys)  # ids prefixed
    created = snapshot(tmp_path) - before
    allowed = (workdir / "kb", workdir / "kb-all")
    assert all(any(p == a or a in p.parents for a in allowed) for p in created)
    for kb in allowed:
        assert_json_and_npy_only(kb)
    assert_no_escape_outside(tmp_path)


def test_llm_build_and_its_cache_stay_inside_the_kb_folder(tmp_path: Path, workdir: Path) -> None:
    utterances = hostile_utterances()

    def answer(messages: Sequence[Message]) -> str:
        return json.dumps(
            {
                "entities": [
                    {
                        "name": f"../escape-{MARK}",
                        "type": "person",
                        "is_speaker": False,
                        "sources": [u.id for u in utterances],
                        "attributes": [
                            {"name": "../../x", "value": "/etc/passwd", "sources": [utterances[0].id]}
                        ],
                    }
                ],
                "events": [],
                "topics": [],
            }
        )

    kb = workdir / "kb"
    before = snapshot(tmp_path)
    model = FakeChatModel(answer, model_name=f"../../model-{MARK}")
    extractor = LLMExtractor(model, fused=True, cache=ResponseCache(kb / "cache"))
    builder = AnchorBuilder(extractor, HashingEmbedder(), store=AnchorStore(kb))
    builder.add(utterances)
    assert model.calls and builder.kb.entities
    created = snapshot(tmp_path) - before
    assert all(p == kb or kb in p.parents for p in created), sorted(created)
    counts = assert_json_and_npy_only(kb)
    assert any((kb / "cache").rglob("*.json")), "the model's answers are cached under the KB"
    assert counts[".json"] > 7
    assert_no_escape_outside(tmp_path)


def assert_one_mode(folder: Path, probe: Path) -> None:
    """Every file and folder under ``folder`` has the mode a plain new file or folder gets here."""
    probe.mkdir()
    (probe / "f").write_text("x")
    file_mode, dir_mode = (probe / "f").stat().st_mode & 0o777, probe.stat().st_mode & 0o777
    modes = {
        p.relative_to(folder): p.stat().st_mode & 0o777 for p in folder.rglob("*") if p.name != WRITER_LOCK
    }
    odd = {p: oct(m) for p, m in modes.items() if m != (dir_mode if (folder / p).is_dir() else file_mode)}
    assert not odd, f"expected {oct(file_mode)} files and {oct(dir_mode)} folders: {odd}"


@pytest.mark.parametrize("umask", [0o022, 0o077])
def test_kb_files_share_one_mode_the_users_umask(tmp_path: Path, umask: int) -> None:
    """mkstemp made the KB's JSON files 0600 while its .npy files were 0644."""
    old = os.umask(umask)
    try:
        kb = tmp_path / "kb"
        extractor = LLMExtractor(
            FakeChatModel(lambda m: '{"entities": [], "events": [], "topics": []}'),
            fused=True,
            cache=ResponseCache(kb / "cache"),
        )
        AnchorBuilder(extractor, HashingEmbedder(), store=AnchorStore(kb)).add(hostile_utterances())
        memory = SGMem(HashingEmbedder())
        memory.add(hostile_utterances())
        memory.save(tmp_path / "sg")
        assert_one_mode(kb, tmp_path / "probe-kb")
        assert_one_mode(tmp_path / "sg", tmp_path / "probe-sg")
    finally:
        os.umask(old)


def test_sgmem_build_writes_only_inside_its_folder(
    tmp_path: Path, workdir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    source = write_jsonl(workdir / "hostile.jsonl", hostile_utterances())
    before = snapshot(tmp_path)
    cli(["sgmem", "build", str(source), "-o", "sg", "--embedder", "hashing", "-q"], capsys)
    created = snapshot(tmp_path) - before
    folder = workdir / "sg"
    assert created and all(p == folder or folder in p.parents for p in created)
    assert_json_and_npy_only(folder)
    assert_no_escape_outside(tmp_path)


def test_an_evaluation_run_writes_only_inside_its_output_folder(tmp_path: Path, workdir: Path) -> None:
    from gravity_core.eval.datasets import EvalQuestion, EvalSample
    from gravity_core.eval.runner import run_eval
    from gravity_core.eval.settings import EvalConfig

    utterances = hostile_utterances()
    samples = [
        EvalSample(
            id=sample_id,
            utterances=utterances,
            questions=[
                EvalQuestion(
                    id=f"{sample_id}/q1", question="Where did Maya move?", answer="Bristol", category="1"
                )
            ],
            categories=("1",),
        )
        for sample_id in (f"../../escape-{MARK}", "..", f"/tmp/escape-{MARK}")
    ]
    out = workdir / "run"
    before = snapshot(tmp_path)
    run_eval(
        samples,
        benchmark="locomo",
        output_dir=out,
        embedder=HashingEmbedder(),
        config=EvalConfig(budgets=(500,), settings=("full",)),
    )
    created = snapshot(tmp_path) - before
    assert created and all(p == out or out in p.parents for p in created), sorted(created)
    assert_no_escape_outside(tmp_path)
    assert not os.path.exists(f"/tmp/escape-{MARK}")
