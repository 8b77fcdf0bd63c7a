"""Issue 14: a rank that died while its launcher has not reaped it (a zombie) is found live.

A real 3-rank gloo job started by a small launcher process of this test: rank 2 raises
right after init and exits with 1; ranks 0 and 1 wait for its next step in the job's store. The dead rank has no
environment, open files or stacks left, so discovery by RANK cannot see it. What must hold:
discovery finds it as the zombie child of the ranks' parent, learns its rank by elimination
(WORLD_SIZE=3, ranks 0 and 1 alive under the same parent) and its exit code from /proc, and
the live verdict names it with how it ended (exit code, and the exception from its own output
file, found where its siblings' are), not "left no output".
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from forensics.collect.targets import discover
from hf_testpaths import REPO
from parsers import knowledge
from parsers.pipeline.analyze import analyze

pytestmark = pytest.mark.integration

RANK_BODY = r"""
import os, sys, datetime
import torch, torch.distributed as dist
dist.init_process_group("gloo", timeout=datetime.timedelta(seconds=120))
if dist.get_rank() == 2:
    raise RuntimeError("CUDA out of memory. Tried to allocate 4096.00 GiB (stand-in: raised by the test)")
print("ready", flush=True)
# wait for rank 2's step through the job's store: a gloo collective would fail at once when the
# dead rank's sockets close (NCCL peers hang instead, as in the H200 capture)
dist.distributed_c10d._get_default_store().wait(["rank2-step"], datetime.timedelta(seconds=120))
"""


def _port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


#: the launcher: starts the three ranks, prints their pids, never reaps them (as torchrun has not yet when a rank
#: died). Its own process, not pytest's: the test process may hold zombie children of earlier tests, and the
#: elimination rightly names no rank where several zombies share the ranks' parent
LAUNCHER = r"""
import os, subprocess, sys, time
folder, body = sys.argv[1], sys.argv[2]
procs = []
for rank in range(3):
    with open(os.path.join(folder, f"rank{rank}.log"), "w") as out:
        procs.append(subprocess.Popen([sys.executable, "-c", body], stdout=out, stderr=subprocess.STDOUT,
                                      env=dict(os.environ, RANK=str(rank), LOCAL_RANK=str(rank))))
print(" ".join(str(p.pid) for p in procs), flush=True)
time.sleep(600)
"""


class _Rank:
    """A rank started by the launcher: its pid (what the tests compare)."""

    def __init__(self, pid: int) -> None:
        self.pid = pid


@pytest.fixture
def job(tmp_path: Path, proc_state):
    port = _port()
    env = dict(os.environ, WORLD_SIZE="3", MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port), PYTHONPATH=str(REPO))
    launcher = subprocess.Popen([sys.executable, "-c", LAUNCHER, str(tmp_path), RANK_BODY], env=env,
                                stdout=subprocess.PIPE, text=True)
    procs: list[_Rank] = []
    try:
        procs = [_Rank(int(pid)) for pid in launcher.stdout.readline().split()]
        assert len(procs) == 3
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and proc_state(procs[2].pid) != "Z":
            time.sleep(0.2)
        assert proc_state(procs[2].pid) == "Z", (tmp_path / "rank2.log").read_text()[-2000:]
        time.sleep(1.0)  # ranks 0 and 1 wait in the store by now
        assert all(proc_state(p.pid) in ("S", "R") for p in procs[:2])
        yield procs, f"127.0.0.1:{port}"
    finally:
        for p in procs:
            try:
                os.kill(p.pid, 9)
            except ProcessLookupError:
                pass
        launcher.kill()  # its zombie child goes to init, which reaps it
        launcher.wait(timeout=30)


def test_zombie_rank_is_found_with_its_rank_and_exit_code(job):
    procs, job_id = job
    ranks, _problems = discover(job=job_id)
    by_pid = {p.pid: p for p in ranks}
    dead = by_pid.get(procs[2].pid)
    assert dead is not None, [(p.pid, p.rank) for p in ranks]
    assert dead.rank == 2 and dead.rank_source == "elimination"
    assert any("exit code 1" in line for line in dead.job_evidence)
    assert {by_pid[p.pid].rank for p in procs[:2]} == {0, 1}


def test_live_verdict_says_how_the_dead_rank_ended(job, tmp_path: Path, proc_state):
    procs, job_id = job
    out = tmp_path / "bundle"
    done = subprocess.run([sys.executable, "-m", "forensics", "collect", "--job", job_id, "-o", str(out), "-q"],
                          capture_output=True, text=True, timeout=120, env=dict(os.environ, PYTHONPATH=str(REPO)))
    assert out.is_dir(), done.stderr[-2000:]
    assert all(proc_state(p.pid) in ("S", "R") for p in procs[:2])  # collection left the live ranks running
    culprit = analyze(out, knowledge.load(use_env=False)).verdict.culprit
    assert culprit is not None and culprit.rank == 2 and culprit.pid == procs[2].pid
    assert str(culprit.reason_class) == "exited" and "exit code 1" in culprit.reason
    assert any("elimination" in e for e in culprit.evidence)
    # its own output, found by its siblings' naming (rank0.log -> rank2.log, holding [rank2]: lines)
    assert any(e.startswith("last exception:") and "RuntimeError: CUDA out of memory" in e
               for e in culprit.evidence), culprit.evidence


def test_zombie_named_by_pid_keeps_its_place(job):
    """`collect --pid` with every rank's pid, the dead one included: it is kept, and its rank learned."""
    procs, _job_id = job
    ranks, problems = discover(pids=[p.pid for p in procs])
    dead = next(p for p in ranks if p.pid == procs[2].pid)
    assert dead.rank == 2 and dead.rank_source == "elimination"
    assert any("zombie" in line for line in problems)
    assert dead.job_id == next(p for p in ranks if p.pid == procs[0].pid).job_id and dead.world_size == 3


def test_sibling_naming_renumbers_only_the_launchers_names():
    from forensics.discover.exited import renumbered

    assert renumbered("/logs/job/node05/rank5.stderr", 5, 7) == ["/logs/job/node05/rank7.stderr",
                                                                  "/logs/job/node07/rank7.stderr"]
    assert renumbered("/tmp/run_0/rank0.log", 0, 2)[0] == "/tmp/run_0/rank2.log"  # the temp folder's 0 stays
    assert renumbered("/logs/worker.log", 3, 4) == []
