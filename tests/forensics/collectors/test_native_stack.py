"""The libdw native-stack collector on real hung gloo jobs (torch 2.13 CPU, real ptrace).

What must hold: every thread of every rank is walked (the gloo worker threads py-spy
cannot see included), the waiting ranks' ring all-reduce frames are named, the file
reads back as ThreadStacks, no target is left stopped (also when the helper is cut
short), and a stopped target is not touched and stays stopped.
"""

from __future__ import annotations

import json
import os
import signal

import pytest

from parsers.model.manifest import Status
from forensics.collect.local import collect_local
from forensics.collectors.base import CollectOptions
from forensics.collectors.native_stack import libdw_available
from parsers.readers.native_stack import read_native_json

pytestmark = [pytest.mark.integration,
              pytest.mark.skipif(not libdw_available(), reason="libdw (elfutils) not installed")]


def _functions(stacks) -> list[str]:
    return [f.function for t in stacks for f in t.frames]


def test_native_frames_of_every_thread_and_nothing_left_stopped(hung_job, tmp_path, proc_state):
    job = hung_job("sleep", ranks=3, culprit=2)
    out = tmp_path / "b"
    result = collect_local(out, CollectOptions(native=True), pids=job.alive_pids(), quiet=True)
    waiting_seen = 0
    for rec in result.writer.manifest.ranks:
        col = rec.collector("native-stack")
        assert col is not None and col.status == Status.OK, col and col.error
        assert rec.state_after not in ("T", "t")
        stacks = read_native_json(out / col.files[0], rec.pid)
        names = {t.name for t in stacks}
        assert "pt_gloo_runloop" in names and "gloo_tcp_loop" in names  # threads py-spy cannot show
        assert sum(t.is_main for t in stacks) == 1
        assert len(stacks) == len(os.listdir(f"/proc/{rec.pid}/task"))
        funcs = _functions(stacks)
        if rec.rank != 2:  # a waiting rank: its gloo thread is inside the ring all-reduce
            assert any("gloo" in f and "ring" in f for f in funcs), funcs
            assert any("c10d::Work::wait" in f for f in funcs)
            waiting_seen += 1
        # py-spy ran Python-only (no --native): the native frames came from libdw
        assert "--native" not in rec.collector("py-spy").details["argv"]
    assert waiting_seen == 2
    assert all(proc_state(p) not in ("T", "t") for p in job.pids)


def test_stopped_rank_is_not_walked_and_stays_stopped(hung_job, tmp_path, proc_state):
    job = hung_job("stop", ranks=2, culprit=1)
    stopped = job.pids[1]
    assert proc_state(stopped) == "T"
    result = collect_local(tmp_path / "b", CollectOptions(native=True), pids=job.alive_pids(), quiet=True)
    by_pid = {rec.pid: rec.collector("native-stack") for rec in result.writer.manifest.ranks}
    assert by_pid[stopped].status == Status.SKIPPED
    assert by_pid[job.pids[0]].status == Status.OK
    assert proc_state(stopped) == "T"
    assert proc_state(job.pids[0]) not in ("T", "t")


def test_helper_killed_mid_walk_leaves_target_running(hung_job, tmp_path, proc_state):
    """SIGKILL the helper at once and again and again: the target always runs afterwards."""
    import subprocess
    import sys
    import time

    from forensics.collectors.native_stack import HELPER

    job = hung_job("sleep", ranks=2, culprit=1)
    pid = job.pids[0]
    for delay in (0.05, 0.1, 0.2, 0.3):
        proc = subprocess.Popen([sys.executable, "-I", str(HELPER), str(pid)], stdout=subprocess.DEVNULL,
                                stderr=subprocess.DEVNULL, start_new_session=True)
        time.sleep(delay)
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
        time.sleep(0.05)
        assert proc_state(pid) not in ("T", "t")


def test_helper_output_is_the_reader_format(hung_job, tmp_path):
    import subprocess
    import sys

    from forensics.collectors.native_stack import HELPER

    job = hung_job("sleep", ranks=2, culprit=1)
    done = subprocess.run([sys.executable, "-I", str(HELPER), str(job.pids[0])], capture_output=True, text=True,
                          timeout=60)
    assert done.returncode == 0, done.stderr
    data = json.loads(done.stdout)
    assert data["tool"] == "libdw" and data["pid"] == job.pids[0] and data["error"] is None
    assert isinstance(data["pause_ms"], float)
    path = tmp_path / "native.json"
    path.write_text(done.stdout)
    stacks = read_native_json(path)
    assert {t.thread_id for t in stacks} == {int(t) for t in os.listdir(f"/proc/{job.pids[0]}/task")}
    assert all(f.native for t in stacks for f in t.frames)


def test_reader_refuses_other_json(tmp_path):
    path = tmp_path / "x.json"
    path.write_text(json.dumps({"threads": "no"}))
    with pytest.raises(ValueError):
        read_native_json(path)


def _frames(data: dict) -> dict:
    return {t["tid"]: [(f["function"], f["library"], f["pc"]) for f in t["frames"]] for t in data["threads"]}


def test_serving_helper_with_shared_cache_names_frames_as_the_uncached_helper(hung_job, proc_state):
    """One serving helper for all ranks (shared SymbolCache) against one uncached helper per rank:
    the same frames, frames were named through the cache, and every target is afterwards
    in the state it was in before."""
    import subprocess
    import sys

    from forensics.collectors.native_stack import HELPER

    job = hung_job("sleep", ranks=3, culprit=2)
    pids = job.alive_pids()
    before = {p: proc_state(p) for p in pids}
    requests = "".join(json.dumps({"id": i, "pid": p}) + "\n" for i, p in enumerate(pids, 1))
    served = subprocess.run([sys.executable, "-I", str(HELPER), "--serve"], input=requests, capture_output=True,
                            text=True, timeout=120)
    assert served.returncode == 0, served.stderr
    replies = {json.loads(line)["pid"]: json.loads(line) for line in served.stdout.splitlines()}
    assert set(replies) == set(pids)
    for pid in pids:
        alone = subprocess.run([sys.executable, "-I", str(HELPER), "--no-cache", str(pid)], capture_output=True,
                               text=True, timeout=60)
        assert alone.returncode == 0, alone.stderr
        reference = json.loads(alone.stdout)
        assert "symbols" not in reference  # the reference path does not touch the cache
        cached = replies[pid]
        assert cached["error"] is None and cached["symbols"]["from_cache"] > 0
        # threads of a hung rank stand still: the frames must match exactly, names and libraries included
        assert _frames(cached) == _frames(reference)
    assert all(proc_state(p) == before[p] for p in pids)


def test_collect_uses_one_helper_and_leaves_targets_as_they_were(hung_job, tmp_path, proc_state):
    """Through collect: every rank served by the serving helper, the helper gone afterwards, no target stopped."""
    job = hung_job("sleep", ranks=2, culprit=1)
    pids = job.alive_pids()
    result = collect_local(tmp_path / "b", CollectOptions(native=True), pids=pids, quiet=True)
    for rec in result.writer.manifest.ranks:
        col = rec.collector("native-stack")
        assert col.status == Status.OK and col.details["helper"] == "serve"
        assert col.details["state_before"] not in ("T", "t") and col.details["state_after"] not in ("T", "t")
    from forensics.collectors import native_stack

    assert native_stack._SERVICE._proc is None  # collect_local ended it
    assert all(proc_state(p) not in ("T", "t") for p in pids)
