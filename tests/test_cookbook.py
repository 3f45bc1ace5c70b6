"""Every cookbook recipe runs as written, in a fresh interpreter, and shows what it says it shows.

Each recipe is run as ``python cookbook/<recipe>.py`` from a temporary folder (so nothing is written
into the repository), with OPENAI_API_KEY removed so that the offline path runs; the assertions
read the recipe's printed output (and, where it writes files, the files).
"""

from __future__ import annotations

import importlib.util
import json
import os
import re
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest

from gravity_core.prompts.injection import PRIORITY_INSTRUCTION
from gravity_core.storage.store import AnchorStore

ROOT = Path(__file__).resolve().parents[1]
COOKBOOK = ROOT / "cookbook"
SAMPLE = ROOT / "examples" / "sample_conversation.jsonl"
LOCOMO = Path(os.environ.get("LOCOMO", ROOT.parent / "shared" / "data" / "locomo" / "locomo_dev.json"))


def run_recipe(name: str, *args: str, cwd: Path, keep_openai_key: bool = False, timeout: float = 300) -> str:
    """Run ``cookbook/<name>`` with the test interpreter; its stdout (the run must succeed)."""
    env = dict(os.environ)
    if not keep_openai_key:
        env.pop("OPENAI_API_KEY", None)
    done = subprocess.run(
        [sys.executable, str(COOKBOOK / name), *args],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )
    assert done.returncode == 0, f"{name} failed:\n{done.stdout[-3000:]}\n{done.stderr[-5000:]}"
    return done.stdout


def blocks(output: str, start: str) -> list[str]:
    """The output cut into blocks, each beginning with a line that starts with ``start``."""
    return [start + part for part in output.split("\n" + start)[1:]]


def session_sizes() -> Counter[str]:
    return Counter(json.loads(line)["session"] for line in SAMPLE.read_text(encoding="utf-8").splitlines())


def test_every_recipe_is_listed_in_the_cookbook_readme_and_the_main_readme() -> None:
    readme = (COOKBOOK / "README.md").read_text(encoding="utf-8")
    main_readme = (COOKBOOK.parent / "README.md").read_text(encoding="utf-8")
    helpers = {"fake_openai.py", "chroma_server.py"}
    recipes = sorted(p.name for p in COOKBOOK.glob("*.py") if p.name not in helpers)
    assert len(recipes) == 12
    for recipe in recipes:
        assert f"({recipe})" in readme, f"{recipe} is not linked from cookbook/README.md"
        assert f"(cookbook/{recipe})" in main_readme, f"{recipe} is not linked from README.md's Cookbook"
        source = (COOKBOOK / recipe).read_text(encoding="utf-8")
        assert 'if __name__ == "__main__":' in source and "def main(" in source


@pytest.mark.slow
def test_langchain_chat_over_chroma(tmp_path: Path) -> None:
    out = run_recipe("langchain_chroma_chat.py", "--workdir", str(tmp_path / "work"), cwd=tmp_path)
    assert "history: 96 turns in 6 sessions" in out
    where, biscuit, marathon = blocks(out, "User: ")
    # What the model was shown: the anchors know where Maya works now, the memories came from Chroma.
    assert re.search(r"profile:  - Maya .*Harbourside", where)
    memories = re.findall(
        r"memory:   \[(session_\d+:\d+)\] \((question|provenance|expansion)\) (.*)", biscuit
    )
    assert len(memories) == 4 and all("biscuit" in text.lower() for _, _, text in memories)
    # The k=4 places: the question's own first three hits, then a selected anchor's source turn
    # fetched from Chroma by id.
    slots = re.findall(r"memory:   \[session_\d+:\d+\] \((\w+)\)", out)
    assert slots == ["question", "question", "question", "provenance"] * 3
    assert all(int(n) > 0 for n in re.findall(r"expanded: (\d+) queries made", out))
    # The chat's own history rides along: 2, 4, then 6 messages.
    assert re.findall(r"prompt:   (\d+) messages", out) == ["2", "4", "6"]
    assert "Bot:  Jonas ran the Avon Valley Half Marathon" in marathon
    assert (tmp_path / "work" / "chroma").is_dir() and AnchorStore(tmp_path / "work" / "kb").exists()


@pytest.mark.slow
def test_llamaindex_query_engine(tmp_path: Path) -> None:
    out = run_recipe("llamaindex_query_engine.py", cwd=tmp_path)
    march, biscuit = blocks(out, "Q: ")
    for block in (march, biscuit):
        assert re.search(r"plain    turns \[", block)
        assert "GRAVITY  anchor node + turns [" in block
        assert f"prompt the LLM got starts: {PRIORITY_INSTRUCTION[:40]}" in block
        plain = re.search(r"plain .*: (\d+)/(\d+) answer turns", block)
        ours = re.search(r"GRAVITY .*: (\d+)/\d+ answer turns, (\d+) more cited by the anchors", block)
        assert plain and ours
        # The fused search plus the anchors reach at least the answer turns one plain search reaches.
        assert int(ours.group(1)) + int(ours.group(2)) >= int(plain.group(1))
    # "on Wednesday", said on Saturday 9 March 2024, is resolved to the date in the event records.
    said = r"Wednesday 6 March 2024 \(Wednesday, said 9 March 2024\)"
    assert re.search(said + r" — Maya — signed the lease \[session_3:2\]", march)


@pytest.mark.slow
def test_sgmem_with_and_without_gravity(tmp_path: Path) -> None:
    out = run_recipe("sgmem_host.py", "--budget", "1000", "--anchor-budget", "300", cwd=tmp_path)
    assert re.search(r"SGMem: \{'sessions': 6, .*'turns': 96", out)
    questions = blocks(out, "Q: ")
    assert len(questions) == 6
    for block in questions:
        alone = re.search(r"SGMem alone +(\d+) tokens", block)
        ours = re.search(r"SGMem \+ GRAVITY +(\d+) tokens(?: \((\d+) in anchors\))?", block)
        assert alone and ours
        assert int(alone.group(1)) <= 1000 and int(ours.group(1)) <= 1000  # the same total budget
        assert int(ours.group(2) or 0) <= 300
    assert sum(1 for b in questions if re.search(r"\((\d+) in anchors\)", b)) >= 4
    summary = re.search(
        r"answers covered: SGMem alone (\d)/6, SGMem \+ GRAVITY (\d)/6; answer turns as raw text: "
        r"alone (\d+)/(\d+), with GRAVITY (\d+)/(\d+)",
        out,
    )
    assert summary is not None
    assert summary.group(4) == summary.group(6) and int(summary.group(3)) <= int(summary.group(4))
    assert "LangChain chain over SGMem: Mudlark" in out


@pytest.mark.slow
def test_openai_build_against_a_local_fake_of_the_api(tmp_path: Path) -> None:
    out = run_recipe("openai_langchain_build.py", "--workdir", str(tmp_path / "work"), cwd=tmp_path)
    assert "on a local fake of the OpenAI API" in out
    # Fused extraction: one request per 40 turns, across the 6 sessions; the KB then holds what the
    # recorded answers say.
    assert re.search(r"build: 96 turns in 3 batches, 0 failed; 3 requests, [1-9]\d* prompt", out)
    assert "build again: 0 added, 96 already known; 0 requests" in out
    assert "rebuild from scratch: 96 turns; 0 requests" in out
    assert "city: Leeds -> Bristol (since 2024-04-06" in out
    assert "employer: Northwind General -> Harbourside Children's Hospital" in out
    assert "'on Wednesday' said 2024-03-09 -> 6 March 2024" in out
    recorded = json.loads((COOKBOOK / "data" / "openai_recorded.json").read_text(encoding="utf-8"))
    question, answer = next(iter(recorded["answers"].items()))
    assert f"Q: {question}\nA: {answer}" in out
    prompt_tokens = re.search(r"\(1 requests, (\d+) prompt", out)
    assert prompt_tokens and int(prompt_tokens.group(1)) > 300  # memories and anchors went to the model
    kb = AnchorStore(tmp_path / "work" / "kb").load().kb
    assert len(kb.utterances) == 96 and "biscuit" in kb.entities
    assert any((tmp_path / "work" / "kb" / "cache").iterdir())


@pytest.mark.slow
@pytest.mark.loopback
def test_cli_openai_model_against_the_same_fake(tmp_path: Path) -> None:
    """``gravity build --model openai:gpt-4o-mini`` goes through the entry point to ChatOpenAI."""
    spec = importlib.util.spec_from_file_location("fake_openai", COOKBOOK / "fake_openai.py")
    assert spec is not None and spec.loader is not None
    fake_openai = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(fake_openai)
    gravity = Path(sys.executable).parent / "gravity"
    kb_dir = tmp_path / "kb"
    recording = fake_openai.recorded_answers(COOKBOOK / "data" / "openai_recorded.json")
    with fake_openai.FakeOpenAI(recording) as fake:
        env = {k: v for k, v in os.environ.items() if not k.startswith("OPENAI_")}
        env.update(OPENAI_BASE_URL=fake.url, OPENAI_API_KEY="fake")
        args = [str(gravity), "build", str(SAMPLE), "-o", str(kb_dir), "--extractor", "llm"]
        done = subprocess.run(
            [*args, "--model", "openai:gpt-4o-mini"], env=env, capture_output=True, text=True, check=False
        )
        assert done.returncode == 0, done.stderr[-3000:]
        assert len(fake.requests) == 3  # fused: 96 turns in batches of 40, across sessions
        assert all(r["model"] == "gpt-4o-mini" and "response_format" in r for r in fake.requests)
    maya = AnchorStore(kb_dir).load().kb.entities["maya"]
    assert {a.name: a.value for a in maya.current_attributes()}["city"] == "Bristol"


@pytest.mark.skipif(not os.environ.get("OPENAI_API_KEY"), reason="needs OPENAI_API_KEY (calls OpenAI)")
@pytest.mark.slow
def test_openai_build_with_the_real_api(tmp_path: Path) -> None:
    out = run_recipe("openai_langchain_build.py", cwd=tmp_path, keep_openai_key=True, timeout=600)
    assert "model: OpenAI gpt-4o-mini" in out
    assert re.search(r"build: 96 turns in 3 batches, 0 failed; \d+ requests", out)
    assert "build again: 0 added, 96 already known; 0 requests" in out
    assert "Harbourside" in out.split("\nA: ", 1)[1]


@pytest.mark.slow
def test_live_chat_app(tmp_path: Path) -> None:
    out = run_recipe("live_chat_app.py", "--workdir", str(tmp_path / "app"), cwd=tmp_path)
    start, third, fourth = out.split("\nsession_")
    assert "before (KB generation 1)" in start and "session_3" not in start  # no anchor of session 3 yet
    for block, number, generation in ((third, 3, 2), (fourth, 4, 3)):
        assert f"now (KB generation {generation})" in block
        for framework in ("LangChain ", "LlamaIndex"):
            line = next(line for line in block.splitlines() if line.strip().startswith(framework))
            assert f"'session_{number}'" in line, line  # the chain and query engine built once see it
        assert f"session_{number}:" in block  # the model's prompt cites the new session's turns
    assert "added to the KB by `gravity build` (CLI) in another process" in third
    assert "added to the KB by the Python API in another process" in fourth
    assert "the engine served 3 KB versions, now generation 3" in out
    assert AnchorStore(tmp_path / "app" / "kb").current_generation() == 3


@pytest.mark.slow
def test_multi_user_chat_app(tmp_path: Path) -> None:
    out = run_recipe("multi_user_chat_app.py", "--workdir", str(tmp_path / "app"), cwd=tmp_path)
    asked, forgot, closed = out.split("\n\n")[1:4]
    assert "maya: " in asked and "['Biscuit', 'Northwind']" in asked  # Maya's own memories only
    assert "['Pixel', 'Leith']" in asked.splitlines()[-1]  # Lou's own, and none of Maya's
    turns = session_sizes()["session_2"]
    assert f"maya forgets session_2: {turns} turns" in forgot
    assert "in maya's next prompt: []; in her KB: []" in forgot
    assert "users with a KB now ['lou']" in closed
    maya, lou = closed.splitlines()[1:3]
    assert maya.endswith(": []") and "0 anchor and memory lines" in maya
    assert lou.endswith(": ['Pixel', 'Leith']")
    assert not (tmp_path / "app" / "kbs" / "maya").exists()
    assert AnchorStore(tmp_path / "app" / "kbs" / "lou").exists()


@pytest.mark.slow
def test_incremental_chat_app(tmp_path: Path) -> None:
    out = run_recipe("incremental_chat_app.py", "--workdir", str(tmp_path / "app"), cwd=tmp_path)
    sizes = session_sizes()
    assert f"at start: {{'turns': {sizes['session_1']}," in out
    adds = re.findall(
        r"(session_\d) \(.*?\): (\d+) user messages answered.*?KB add: (\d+) new turns, (\d+) skipped, "
        r"[\d.]+ s -> turns (\d+) \(\+\d+\), entities (\d+) \(\+\d+\), events (\d+) \(\+\d+\), topics (\d+)",
        out,
        re.DOTALL,
    )
    assert [a[0] for a in adds] == [f"session_{n}" for n in range(2, 7)]
    total = sizes["session_1"]
    previous = (0, 0, 0)
    for session, answered, added, skipped, turns, entities, events, topics in adds:
        total += sizes[session]
        assert int(answered) > 0
        assert int(added) == sizes[session] and skipped == "0"  # only the finished session is extracted
        assert int(turns) == total
        grown = (int(entities), int(events), int(topics))
        assert all(now >= before for now, before in zip(grown, previous, strict=True))
        previous = grown
    assert "whole history again: 0 added, 96 skipped; after a restart: 0 added, 96 skipped" in out
    incremental = re.search(r"incremental KB: (\{.*\})", out)
    at_once = re.search(r"built at once:  (\{.*\})", out)
    assert incremental and at_once and incremental.group(1) == at_once.group(1)
    assert len(AnchorStore(tmp_path / "app" / "kb").load().kb.utterances) == 96


@pytest.mark.skipif(not LOCOMO.exists(), reason=f"LoCoMo not found at {LOCOMO} (set LOCOMO)")
@pytest.mark.slow
def test_locomo_evaluation_and_plots(tmp_path: Path) -> None:
    pytest.importorskip("matplotlib")
    run = tmp_path / "run"
    out = run_recipe(
        "locomo_eval.py",
        "--locomo",
        str(LOCOMO),
        "--sample",
        "conv-30",
        "--questions",
        "12",
        "--embedder",
        "hashing",  # the same run, with a crude fast embedder: MiniLM takes about 20 s here
        "--output",
        str(run),
        cwd=tmp_path,
    )
    assert re.search(r"conv-30: \d+ turns, 12 questions", out)
    data = json.loads((run / "results.json").read_text(encoding="utf-8"))
    assert data["info"]["questions"] == 12 and (run / "report.md").stat().st_size > 500
    assert data["info"]["embedder"].startswith("hashing")
    assert len({r["category"] for r in data["records"]}) >= 3  # a spread of questions, not the first 12
    for host in data["summary"].values():
        for setting in host.values():
            for cell in setting.values():
                for value in (cell["overall"]["answer_coverage"], cell["overall"]["evidence_recall"]):
                    assert 0.0 <= value <= 1.0
    for budget in (800, 1500, 3000):
        assert re.search(rf"{budget} tokens: answer coverage [01]\.\d{{3}} -> [01]\.\d{{3}}", out)
    plots = sorted(p.name for p in (run / "plots").glob("*.png"))
    assert plots == [
        "vector_coverage_by_category.png",
        "vector_recall_by_category.png",
        "vector_vs_budget.png",
    ]
    for name in plots:
        assert str(run / "plots" / name) in out and (run / "plots" / name).stat().st_size > 1000
    assert out.count("\n      ") == 3  # one reading note per plot


@pytest.mark.server
@pytest.mark.slow
def test_shared_kb_on_a_chroma_server(tmp_path: Path) -> None:
    if not (Path(sys.executable).parent / "chroma").exists():
        pytest.skip("no chroma executable (install the 'chroma' extra)")
    out = run_recipe(
        "shared_kb_chroma_server.py", "--workers", "3", "--workdir", str(tmp_path / "w"), cwd=tmp_path
    )
    assert re.search(r"started `chroma run` on 127\.0\.0\.1:\d+", out)
    written = re.search(r"anchors on the server: (\d+) vectors written", out)
    assert written and int(written.group(1)) > 0
    workers = re.findall(r"worker (\d) \(pid (\d+)\): wrote (\d+) vectors", out)
    assert sorted(w[0] for w in workers) == ["0", "1", "2"]
    assert len({w[1] for w in workers}) == 3  # three separate processes
    assert all(w[2] == "0" for w in workers)  # the server already held the KB: the workers only read
    assert out.count("Where does Maya work now?") == 3 and "'entity:maya'" in out
    assert "all workers agree: True" in out
