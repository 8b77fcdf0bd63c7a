"""Stack-tool output is inside the budget (issue 40 item 6): threads and frames capped per rank, the text counted
against the rank's and the collection's bytes, what was cut said. Input built here: 1,000 threads of 300 frames."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from hf_testpaths import FIXTURES, REPO
from forensics.collect.tool import find_tool, run_tool, tool_override_var
from forensics.collect.budget import TOOL_FRAMES, TOOL_THREADS, ByteBudget, cap_threads, leading_items
from forensics.collectors.pyspy import _save


class _Target:
    def __init__(self, root, budget):
        self.pid, self.root, self.budget = 4242, root, budget

    def out(self, name):
        return self.root / name, name


def _threads(n: int, frames: int) -> list:
    return [{"thread_id": t, "thread_name": f"t{t}", "frames": [{"name": f"f{i}", "filename": "x.py", "line": i}
                                                                for i in range(frames)]} for t in range(n)]


def test_a_rank_of_1000_threads_of_300_frames_is_capped_and_the_cut_said(tmp_path):
    kept, cut = cap_threads(_threads(1000, 300))
    assert len(kept) == TOOL_THREADS and all(len(t["frames"]) == TOOL_FRAMES for t in kept)
    assert cut.startswith("744 of 1000 threads") and f"at most {TOOL_FRAMES}" in cut
    parent = ByteBudget(1 << 30, "collection")
    rec = _save("py-spy", _Target(tmp_path, ByteBudget(512 << 20, "rank", parent)), _threads(1000, 300), {})
    size = (tmp_path / rec.files[0]).stat().st_size
    assert rec.status == "ok" and size < 20 << 20 and parent.used == size
    assert rec.details["cut"] == cut and any("threads left out" in c for c in parent.cuts)
    assert len(json.loads((tmp_path / rec.files[0]).read_text())) == TOOL_THREADS


def test_tool_output_past_the_budget_is_not_written_and_said(tmp_path):
    parent = ByteBudget(1000, "collection")
    rec = _save("py-spy", _Target(tmp_path, ByteBudget(512 << 20, "rank", parent)), _threads(4, 50), {})
    assert rec.status == "skipped" and not rec.files and "collection cap" in rec.error
    assert parent.used == 0 and not list(tmp_path.iterdir())


def test_nothing_is_cut_from_a_real_sized_rank():
    kept, cut = cap_threads(_threads(40, 120))
    assert cut is None and len(kept) == 40


def test_a_cut_by_a_tool_cap_is_said_with_the_byte_cuts():
    parent = ByteBudget(1 << 30, "collection")
    rank = ByteBudget(512 << 20, "rank", parent)
    rank.note("pid 1 gdb.json: 744 of 1000 threads left out")
    rank.cut("pid 1 pyspy.json", 100, 0)
    assert len(parent.cuts) == 2 and parent.cuts[0].startswith("pid 1 gdb.json")


_TARGET = """
import sys, threading
threading.stack_size(256 << 10)
gate = threading.Event()
def deep(n):
    return list(map(deep, [n - 1]))[0] if n else gate.wait()  # C frames between the Python ones (gdb sees them)
threads = [threading.Thread(target=deep, args=(20,), daemon=True) for _ in range(1000)]
for t in threads:
    t.start()
print('ready', flush=True)
for line in sys.stdin:  # still running: answers each line
    print('alive', line.strip(), flush=True)
"""


def _rank_files(out: Path) -> dict[str, int]:
    return {p.name: p.stat().st_size for p in out.glob("hosts/*/rank*/**/*") if p.is_file()}


@pytest.mark.integration
@pytest.mark.skipif(os.geteuid() != 0 or find_tool("py-spy") is None, reason="needs root (ptrace) and py-spy")
@pytest.mark.parametrize("tool", ["py-spy", "gdb"])
def test_a_real_rank_of_1000_threads_stays_inside_a_small_cap_and_runs_on(tmp_path, tool):
    """A real Python target of 1,000 threads, each 20 calls deep and blocked on an Event (py-spy prints about
    9 MB for it), collected by the real tool under a 1 MiB rank cap: the tool's output is read until the cap and
    the tool stopped there, the rank's files stay under the cap, the manifest's note says what was cut, and the
    target answers afterwards (not left stopped)."""
    if tool == "gdb" and find_tool("gdb") is None:
        pytest.skip("gdb is not installed")
    target = subprocess.Popen([sys.executable, "-c", _TARGET], env={**os.environ, "RANK": "0", "WORLD_SIZE": "1"},
                              stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        assert target.stdout.readline().strip() == "ready"
        out = tmp_path / "bundle"
        argv = [sys.executable, "-m", "forensics", "collect", "--pid", str(target.pid), "-o", str(out), "-q",
                "--rank-max-mib", "1", "--second-look", "0", "--timeout", "60"]
        env = {**os.environ, "PYTHONPATH": str(REPO)}
        if tool == "gdb":  # gdb alone: py-spy pointed at nothing (its override variable), gdb given the rank's bytes
            argv += ["--gdb", "--gdb-timeout", "120"]
            env[tool_override_var("py-spy")] = str(tmp_path / "no-py-spy")
        done = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=300)
        assert done.returncode in (0, 3), done.stderr
        manifest = json.loads((out / "manifest.json").read_text())
        record = next(c for c in manifest["ranks"][0]["collectors"] if c["name"] == tool)
        files = _rank_files(out)
        assert sum(files.values()) <= 1 << 20, files
        name = "pyspy.json" if tool == "py-spy" else "gdb.json"
        assert record["status"] == "ok" and name in files and files[name] > 100 << 10, record
        cut = record["details"]["output_cut" if tool == "py-spy" else "cut"]
        assert ("stopped after" in cut) if tool == "py-spy" else ("not listed" in cut and "per-rank cap" in cut), cut
        note = " ".join(manifest["notes"])
        assert "byte caps" in note and (("py-spy" in note) if tool == "py-spy" else ("gdb.json" in note)), note
        kept = json.loads(next(out.glob(f"hosts/*/rank*/{name}")).read_text())
        assert 0 < len(kept if tool == "py-spy" else kept["stacks"]) < 1000
        if tool == "gdb":  # -thread-info read as it came: 256 threads kept, the other 745 only counted, the cut said
            assert (len(kept["threads"]), kept["seen"]) == (256, 1001) and "745 of 1001" in cut and "-thread-info" in cut
        assert _state(target.pid) not in ("T", "t")
        target.stdin.write("ping\n")
        target.stdin.flush()
        assert target.stdout.readline().strip() == "alive ping"  # it runs on
    finally:
        target.kill()
        target.wait()


def _state(pid: int) -> str:
    return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]


def test_a_tool_that_prints_without_end_is_stopped_at_the_cap():
    """stdout is read as it comes and the tool killed at the cap, not read whole first (nor run to its timeout)."""
    endless = [sys.executable, "-c", "import sys\nwhile True: sys.stdout.write('x' * 65536)"]
    result = run_tool(endless, timeout=120, max_stdout=100_000)
    assert result.cut and not result.timed_out and not result.ok and len(result.stdout) == 100_000


def test_the_whole_threads_before_a_cut_are_kept():
    """py-spy's real JSON cut anywhere: the threads wholly before the cut are read, never a part of one."""
    text = (FIXTURES / "stacks/pyspy_waiter_rank0.json").read_text()
    whole = json.loads(text)
    for end in range(0, len(text), max(1, len(text) // 97)):
        got = leading_items(text[:end])
        assert got == whole[:len(got)]
    assert leading_items(text) == whole and leading_items("not json") == []
