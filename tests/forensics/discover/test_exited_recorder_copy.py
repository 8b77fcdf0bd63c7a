"""Issue 39: a rank that finished and exited while its peers hang left its recorder state only as the copy beside
its logs (its /dev/shm file goes at a clean finalize); the live collection must find that copy, as the logs folder
does, or a live look says less than the post-mortem (seen on the H100: seed 41's order mismatch, the odd rank
finished its broadcast and exited 0; live said "exited", the logs folder said what it called).

Real parts: the recorder plugin driven by the NCCL stand-in harness (a clean finalize, exit 0) is rank 1, left
unreaped by a launcher of this test beside a sleeping rank 0 whose environment names its own copy folder
(`logs/node00`, as a launcher writes per-rank folders); discovery learns rank 1 by elimination and finds its
copy in `logs/node01`; `forensics collect` puts it in the bundle."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from forensics.collect.targets import discover
from forensics.discover.exited import copied_state
from forensics.discover.rankenv import RankProcess
from hf_testpaths import REPO
from parsers.readers.recorder import read_recorder_file

pytestmark = pytest.mark.integration

LAUNCHER = r"""
import json, os, subprocess, sys, time
spec = json.loads(sys.argv[1])
procs = [subprocess.Popen(argv, env=dict(os.environ, **env), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
         for argv, env in spec]
print(" ".join(str(p.pid) for p in procs), flush=True)
time.sleep(600)
"""


@pytest.fixture
def job(tmp_path: Path, plugin, harness, state_dir, proc_state):
    logs = tmp_path / "logs"
    common = {"WORLD_SIZE": "2", "FORENSICS_RECORDER_DIR": str(state_dir), "NCCL_PROFILER_PLUGIN": str(plugin)}
    spec = [([sys.executable, "-c", "import time; time.sleep(120)"],
             {**common, "RANK": "0", "LOCAL_RANK": "0", "FORENSICS_RECORDER_COPY_DIR": str(logs / "node00")}),
            ([str(harness), str(plugin), "5", "run", "2", "12", "2", "4"],
             {**common, "RANK": "1", "LOCAL_RANK": "1", "FORENSICS_RECORDER_COPY_DIR": str(logs / "node01"),
              "FORENSICS_RECORDER_RING": "64"})]
    launcher = subprocess.Popen([sys.executable, "-c", LAUNCHER, json.dumps(spec)], stdout=subprocess.PIPE, text=True)
    pids: list[int] = []
    try:
        pids = [int(p) for p in launcher.stdout.readline().split()]
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and proc_state(pids[1]) != "Z":
            time.sleep(0.1)
        assert proc_state(pids[1]) == "Z" and proc_state(pids[0]) in ("S", "R")
        yield pids, logs
    finally:
        for pid in pids:
            try:
                os.kill(pid, 9)
            except ProcessLookupError:
                pass
        launcher.kill()
        launcher.wait(timeout=30)


def test_exited_rank_brings_its_finalize_copy(job, tmp_path: Path):
    (alive, dead), logs = job
    copies = sorted((logs / "node01").glob(f"nccl-recorder.*.{dead}.*.bin"))
    assert copies, "the harness left no copy at its clean finalize"
    ranks, _problems = discover(pids=[alive, dead])
    proc = next(p for p in ranks if p.pid == dead)
    assert proc.rank == 1 and proc.rank_source in ("elimination", "recorder-file")
    assert proc.recorder_files == copies, proc.job_evidence
    assert not list((logs / "node00").glob("*.bin"))  # the sibling's own folder holds nothing of it

    out = tmp_path / "bundle"
    done = subprocess.run([sys.executable, "-m", "forensics", "collect", "--pid", f"{alive},{dead}", "-o",
                           str(out), "-q"], capture_output=True, text=True, timeout=120,
                          env=dict(os.environ, PYTHONPATH=str(REPO)))
    got = sorted(out.glob(f"hosts/*/rank1-pid{dead}/recorder/*.bin"))
    assert [g.name for g in got] == [c.name for c in copies], done.stderr[-2000:]
    st = read_recorder_file(got[0])
    assert st.pid == dead and st.finalize_copy and [c.index for c in st.colls] == list(range(12))


def test_a_copy_folder_only_renumbered_by_rank_and_only_its_own_pid(tmp_path: Path):
    """What the search reads: the sibling's folder as it expands for the dead pid, then renumbered by rank; a file
    of another pid in that folder is not taken."""
    for name in ("node03", "node05"):
        (tmp_path / name).mkdir()
    (tmp_path / "node05" / "nccl-recorder.h.4242.0.bin").write_bytes(b"x")
    (tmp_path / "node05" / "nccl-recorder.h.777.0.bin").write_bytes(b"x")
    sib = RankProcess(pid=1, host="h", rank=3, local_rank=3, world_size=8, local_world_size=8, group_rank=None,
                      job_id=None, environ={"FORENSICS_RECORDER_COPY_DIR": str(tmp_path / "node03")})
    dead = RankProcess(pid=4242, host="h", rank=5, local_rank=None, world_size=8, local_world_size=None,
                       group_rank=None, job_id=None)
    assert copied_state(dead, [sib]) == [tmp_path / "node05" / "nccl-recorder.h.4242.0.bin"]
    sib.environ["FORENSICS_RECORDER_COPY_DIR"] = "none"
    assert copied_state(dead, [sib]) == []
    sib.environ.pop("FORENSICS_RECORDER_COPY_DIR")
    sib.environ["NCCL_DEBUG_FILE"] = f"{tmp_path}/node03/nccl.%h.%p.log"
    assert copied_state(dead, [sib]) == [tmp_path / "node05" / "nccl-recorder.h.4242.0.bin"]
