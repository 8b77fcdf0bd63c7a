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
from forensics.collect.budget import (TOOL_FRAMES, TOOL_THREADS, ByteBudget, cap_threads, fit_doc, leading_items,
                                     tool_room, write_whole, write_within)
from forensics.collectors.base import CollectOptions, RankTarget
from forensics.collectors.native_stack import libdw_available
from forensics.collectors.gdb import GdbCollector
from forensics.collectors.pyspy import PySpyCollector, _save


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
    return {str(p.relative_to(next(out.glob("hosts/*/rank*")))): p.stat().st_size
            for p in out.glob("hosts/*/rank*/**/*") if p.is_file()}


def _collect_capped(tmp_path: Path, pid: int, extra: list[str], without_py_spy: bool) -> tuple[dict, Path]:
    """`forensics collect` of one pid under a 1 MiB rank cap (py-spy pointed at nothing when asked: its override
    variable); the manifest and the bundle."""
    out = tmp_path / "bundle"
    argv = [sys.executable, "-m", "forensics", "collect", "--pid", str(pid), "-o", str(out), "-q",
            "--rank-max-mib", "1", "--second-look", "0", "--timeout", "60", *extra]
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    if without_py_spy:
        env[tool_override_var("py-spy")] = str(tmp_path / "no-py-spy")
    done = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode in (0, 3), done.stderr
    return json.loads((out / "manifest.json").read_text()), out


#: tool: (collect's options, py-spy left out, its file, the record's key of the cut, what the cut says)
_LIVE = {"py-spy": ([], False, "pyspy.json", "output_cut", "stopped after"),
         "gdb": (["--gdb", "--gdb-timeout", "120"], True, "gdb.json", "cut", "not listed"),
         "native-stack": (["--native"], True, "native.json", "cut", "threads left out")}


@pytest.mark.integration
@pytest.mark.skipif(os.geteuid() != 0 or find_tool("py-spy") is None, reason="needs root (ptrace) and py-spy")
@pytest.mark.parametrize("tool", sorted(_LIVE))
def test_a_real_rank_of_1000_threads_stays_inside_a_small_cap_and_runs_on(tmp_path, tool):
    """A real Python target of 1,000 threads, each 20 calls deep and blocked on an Event (py-spy prints about
    9 MB for it, the libdw helper 13 MB), collected by the real tool under a 1 MiB rank cap: the tool's output is
    read until the cap and the tool stopped there (py-spy, gdb) or its leading threads kept (libdw), the rank's
    files stay under the cap, the manifest's note says what was cut, and the target answers afterwards (not left
    stopped)."""
    if tool == "gdb" and find_tool("gdb") is None:
        pytest.skip("gdb is not installed")
    if tool == "native-stack" and not libdw_available():
        pytest.skip("libdw is not installed")
    extra, without_py_spy, name, key, says = _LIVE[tool]
    target = subprocess.Popen([sys.executable, "-c", _TARGET], env={**os.environ, "RANK": "0", "WORLD_SIZE": "1"},
                              stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        assert target.stdout.readline().strip() == "ready"
        manifest, out = _collect_capped(tmp_path, target.pid, extra, without_py_spy)
        record = next(c for c in manifest["ranks"][0]["collectors"] if c["name"] == tool)
        files = _rank_files(out)
        assert sum(files.values()) <= 1 << 20, files
        assert record["status"] == "ok" and name in files and files[name] > 100 << 10, record
        cut = record["details"][key]
        assert says in cut and (tool == "py-spy" or "per-rank cap" in cut), cut
        note = " ".join(manifest["notes"])
        assert "byte caps" in note and ("py-spy" if tool == "py-spy" else name) in note, note
        kept = json.loads(next(out.glob(f"hosts/*/rank*/{name}")).read_text())
        stacks = kept if tool == "py-spy" else kept["stacks" if tool == "gdb" else "threads"]
        assert 0 < len(stacks) < 1000
        if tool == "gdb":  # -thread-info read as it came: 256 threads kept, the other 745 only counted, the cut said
            assert (len(kept["threads"]), kept["seen"]) == (256, 1001)
            assert "745 of 1001" in cut and "-thread-info" in cut
        assert _state(target.pid) not in ("T", "t")
        target.stdin.write("ping\n")
        target.stdin.flush()
        assert target.stdout.readline().strip() == "alive ping"  # it runs on
    finally:
        target.kill()
        target.wait()


_PARENT = f"""
import subprocess, sys
child = subprocess.Popen([sys.executable, '-c', {_TARGET!r}], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
print(child.stdout.readline().strip(), child.pid, flush=True)
sys.stdin.readline()
child.kill()
"""


@pytest.mark.integration
@pytest.mark.skipif(os.geteuid() != 0 or find_tool("py-spy") is None, reason="needs root (ptrace) and py-spy")
def test_a_ranks_child_of_1000_threads_counts_against_its_ranks_cap(tmp_path):
    """The same target as a rank's child (a DataLoader worker's place): its proc.json and py-spy's output
    were written outside every byte cap (its RankTarget had an unlimited budget); now they are the rank's:
    the rank's folder, children included, stays under 1 MiB and the note names the child's cut."""
    rank = subprocess.Popen([sys.executable, "-c", _PARENT], env={**os.environ, "RANK": "0", "WORLD_SIZE": "1"},
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    child = None
    try:
        ready, child = rank.stdout.readline().split()
        assert ready == "ready"
        manifest, out = _collect_capped(tmp_path, rank.pid, [], False)
        files = _rank_files(out)
        assert sum(files.values()) <= 1 << 20, files
        assert f"children/pid{child}/proc.json" in files and files[f"children/pid{child}/proc.json"] > 50 << 10
        note = " ".join(manifest["notes"])
        assert f"pid {child} py-spy" in note or f"pid {child} pyspy.json" in note, note
    finally:
        rank.kill()
        rank.wait()
        if child is not None:
            _kill(int(child))


def _kill(pid: int) -> None:
    try:
        os.kill(pid, 9)
    except ProcessLookupError:
        pass


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


def test_a_written_file_is_counted_cut_to_the_bytes_left_or_left_out_and_said(tmp_path):
    """write_within (tool-error files, RAS reports): the rank's and the collection's bytes both charged, exactly
    what was written; past them the file keeps its start, then is not written at all; each cut in the note."""
    parent = ByteBudget(1000, "collection")
    rank = ByteBudget(512 << 20, "rank", parent)
    assert write_within(rank, tmp_path / "a", b"a" * 600, "pid 1 a") == (True, None)
    written, cut = write_within(rank, tmp_path / "b", b"b" * 600, "pid 1 b")
    assert written and (tmp_path / "b").read_bytes() == b"b" * 400 and "400 of 600" in cut
    written, cut = write_within(rank, tmp_path / "c", b"c" * 10, "pid 1 c")
    assert not written and not (tmp_path / "c").exists() and "(10 bytes;" in cut
    assert parent.used == rank.used == 1000 and len(parent.cuts) == 2
    assert parent.cuts[0].startswith("pid 1 b") and parent.cuts[1] == cut


def test_a_json_file_is_written_whole_or_not_at_all_and_the_skip_said(tmp_path):
    """write_whole (py-spy's and gdb's JSON, the host's JSON files): a file a cut would leave unreadable is written
    whole while the bytes last, charged exactly; past them it is not written, nothing stays charged, and the
    skip is said in the note."""
    parent = ByteBudget(1000, "collection")
    rank = ByteBudget(512 << 20, "rank", parent)
    doc = json.dumps({"threads": list(range(150))})
    assert write_whole(rank, tmp_path / "a.json", doc, "pid 1 a.json") is None
    assert json.loads((tmp_path / "a.json").read_text()) == {"threads": list(range(150))}
    assert parent.used == rank.used == len(doc) and not parent.cuts
    cut = write_whole(rank, tmp_path / "b.json", doc, "pid 1 b.json")
    assert not (tmp_path / "b.json").exists() and parent.used == rank.used == len(doc)
    # wording is the behaviour: the manifest's note names the file, its size and the cap
    assert cut == parent.cuts[0] and cut.startswith(f"pid 1 b.json: not copied ({len(doc)} bytes; collection cap")


@pytest.mark.parametrize("collector", [PySpyCollector, GdbCollector], ids=["py-spy", "gdb"])
def test_a_stack_tool_is_not_run_when_no_byte_is_left_and_says_so(tmp_path, collector):
    """tool_room: with the collection's bytes spent, py-spy and gdb are not run on a real process (it is not paused
    for output that could not be written); each says so in its record and the note, through one function."""
    if collector is GdbCollector and find_tool("gdb") is None:
        pytest.skip("gdb is not installed")
    if collector is PySpyCollector and find_tool("py-spy") is None:
        pytest.skip("py-spy is not installed")
    target = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        parent = ByteBudget(1000, "per-collection")
        parent.reserve(1000)
        where = RankTarget(pid=target.pid, host="h", rank=0, environ={}, bundle_root=tmp_path, rel_dir="rank0",
                           budget=ByteBudget(512 << 20, "per-rank", parent))
        record = collector().collect(where, CollectOptions(timeout=30, gdb=True))
    finally:
        target.kill()
        target.wait()
    assert record.status == "skipped" and not record.files and record.error in parent.cuts
    assert record.error.endswith(": not run (per-collection cap of 1000 bytes reached)")  # wording is the behaviour
    assert tool_room(ByteBudget(10, "x"), "t") == (10, None)


def test_a_document_keeps_its_leading_items_that_fit_and_is_charged_what_it_takes():
    doc = {"pid": 1, "threads": [{"tid": n, "pcs": list(range(50))} for n in range(100)]}
    parent = ByteBudget(5000, "collection")
    text, cut = fit_doc(ByteBudget(512 << 20, "rank", parent), doc, "threads", "pid 1 native-stack.json")
    kept = json.loads(text)["threads"]
    assert 0 < len(kept) < 100 and kept == [{"tid": n, "pcs": list(range(50))} for n in range(len(kept))]
    assert len(text) <= 5000 and parent.used == len(text)
    assert cut.startswith(f"pid 1 native-stack.json: {100 - len(kept)} of 100")
    whole, none = fit_doc(ByteBudget(1 << 20, "rank"), {"threads": [1, 2]}, "threads", "x")
    assert none is None and json.loads(whole) == {"threads": [1, 2]}


@pytest.mark.skipif(find_tool("py-spy") is None, reason="needs py-spy")
def test_a_real_py_spy_error_file_is_counted_and_cut_to_the_bytes_left(tmp_path):
    """Real py-spy on a process that is not Python fails; its error text goes to pyspy.err.txt, which now counts
    against the rank's and the collection's bytes (it was written whole, outside both): with 12 bytes left it
    keeps its first 12, and the cut is said."""
    target = subprocess.Popen(["sleep", "60"])
    try:
        parent = ByteBudget(1 << 20, "per-collection")
        parent.reserve((1 << 20) - 12)
        rank = ByteBudget(512 << 20, "per-rank", parent)
        where = RankTarget(pid=target.pid, host="h", rank=0, environ={}, bundle_root=tmp_path, rel_dir="rank0",
                           budget=rank)
        record = PySpyCollector().collect(where, CollectOptions(timeout=30))
        assert record.status in ("failed", "denied") and record.files == ["rank0/pyspy.err.txt"], record
        assert (tmp_path / "rank0/pyspy.err.txt").stat().st_size == 12 and parent.used == 1 << 20
        assert "pyspy.err.txt" in record.details["budget_cut"] and record.details["budget_cut"] in parent.cuts
    finally:
        target.kill()
        target.wait()
