"""The recorder's state goes beside the NCCL logs when a job dies (issue 39 item 6).

A logs folder on shared storage must hold what `collect` would have read from /dev/shm on
each host: the harness (a stand-in for NCCL that drives the real plugin) hangs in a
collective, then NCCL's abort (finalize with ops in flight), a SIGABRT or the process's
exit must leave a decodable copy in the folder of NCCL_DEBUG_FILE (or
FORENSICS_RECORDER_COPY_DIR). A clean finalize leaves a small copy too (header and ring of
operations): a rank that called another collective than its peers may finish it and exit 0, and
that copy is then the only record of what it called.
"""

from __future__ import annotations

import os
import signal
import socket
import stat
import time

import pytest

from nccl_patches.harness import run_harness, start_hanging_rank
from parsers.judges.recorder import analyse_comm
from parsers.readers.recorder import COLL_SIZE, HEADER_SIZE, read_recorder_dir, read_recorder_file

pytestmark = pytest.mark.integration

RECV_WAIT = 10


def hang(harness, plugin, ranks, env: dict[str, str], rank: int = 1):
    """One harness rank hung in all-reduce seq 5 with a receive waiting (state RecvWait)."""
    r = start_hanging_rank(harness, plugin, 5, rank, 4, 5, 3, 16, RECV_WAIT, 0, env)
    ranks.append(r)
    return r


def wait_for(pred, timeout: float = 10.0) -> bool:
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if pred():
            return True
        time.sleep(0.05)
    return pred()


def test_abort_mid_hang_copies_the_state_into_the_nccl_log_folder(plugin, harness, state_dir, tmp_path, ranks):
    logs = tmp_path / "logs"
    env = {"FORENSICS_RECORDER_DIR": str(state_dir), "NCCL_DEBUG_FILE": f"{logs}/nccl.%h.%p.log",
           "HARNESS_ABORT": "1"}
    r = hang(harness, plugin, ranks, env, rank=2)
    copies = sorted(logs.glob("nccl-recorder.*.bin"))
    assert [c.name for c in copies] == [p.name for p in sorted(state_dir.glob("nccl-recorder.*.bin"))]
    st = read_recorder_file(copies[0])
    assert st.pid == r.pid and st.rank == 2
    assert st.in_flight_ops, "the copy holds the op the rank waits in"
    assert not list(logs.glob("*.tmp"))


def test_sigabrt_copies_then_dies_by_the_default_action(plugin, harness, state_dir, tmp_path, ranks):
    copy_dir = tmp_path / "shared" / "%h"
    env = {"FORENSICS_RECORDER_DIR": str(state_dir), "FORENSICS_RECORDER_COPY_DIR": str(copy_dir),
           "NCCL_DEBUG_FILE": str(tmp_path / "elsewhere" / "nccl.log")}
    r = hang(harness, plugin, ranks, env)
    assert not list(tmp_path.rglob("shared/*/nccl-recorder.*.bin")), "no copy while the job runs"
    os.kill(r.pid, signal.SIGABRT)
    assert r.proc.wait(timeout=10) == -signal.SIGABRT  # handed on to the default action: the process ends
    host = socket.gethostname().split(".")[0]
    (copy,) = (tmp_path / "shared" / host).glob("nccl-recorder.*.bin")
    st = read_recorder_file(copy)
    assert st.pid == r.pid and st.rank == 1 and st.in_flight_ops
    assert not (tmp_path / "elsewhere").exists() or not list((tmp_path / "elsewhere").glob("*.bin"))


def test_exit_without_finalize_copies_the_whole_state(plugin, harness, state_dir, tmp_path):
    logs = tmp_path / "a"
    done = run_harness(harness, plugin, 5, ["run", "2", "12", "2", "4"],
                       {"FORENSICS_RECORDER_DIR": str(state_dir), "NCCL_DEBUG_FILE": f"{logs}/nccl.log",
                        "HARNESS_NO_FINALIZE": "1"})
    assert done.returncode == 0, done.stderr
    states, problems = read_recorder_dir(logs)
    assert problems == [] and sorted(s.comm_id for s in states) == [0x1000, 0x1001]
    assert all(s.coll_next == 12 and s.death_copy and not s.finalize_copy and s.proxy_ops for s in states)


def test_clean_finalize_leaves_the_ring_of_operations_beside_the_logs(plugin, harness, state_dir, tmp_path):
    """Issue 39: a rank that finished its own (mismatched) call and exited 0 must still say what it called."""
    logs = tmp_path / "b"
    done = run_harness(harness, plugin, 5, ["run", "2", "12", "2", "4"],
                       {"FORENSICS_RECORDER_DIR": str(state_dir), "NCCL_DEBUG_FILE": f"{logs}/nccl.log",
                        "FORENSICS_RECORDER_RING": "64"})
    assert done.returncode == 0, done.stderr
    assert not list(state_dir.glob("*.bin")), "the /dev/shm file still goes at a clean finalize"
    states, problems = read_recorder_dir(logs)
    assert problems == [] and sorted(s.comm_id for s in states) == [0x1000, 0x1001]
    for st in states:
        assert st.finalize_copy and not st.death_copy and st.comm_state == "finalized"
        assert [c.index for c in st.colls] == list(range(12)) and all(c.state == "complete" for c in st.colls)
        assert st.proxy_ops == [] and st.proxy_next > 0  # proxy ops ran, all stopped: left out of the copy
    assert not list(logs.glob("*.tmp"))


def test_a_finalize_copy_is_bounded_and_private(plugin, harness, state_dir, tmp_path):
    """The header and the ring, whatever the proxy slots; mode 0600 (the logs folder may be shared)."""
    logs = tmp_path / "logs"
    env = {"FORENSICS_RECORDER_DIR": str(state_dir), "NCCL_DEBUG_FILE": f"{logs}/nccl.log",
           "FORENSICS_RECORDER_RING": "64", "FORENSICS_RECORDER_PROXY_SLOTS": "65536"}
    done = run_harness(harness, plugin, 5, ["run", "1", "3", "1", "2"], env)
    assert done.returncode == 0, done.stderr
    (copy,) = logs.glob("nccl-recorder.*.bin")
    assert copy.stat().st_size == HEADER_SIZE + 64 * COLL_SIZE  # not the 16 MiB of 65536 proxy slots
    assert stat.S_IMODE(copy.stat().st_mode) == 0o600


def test_a_copy_follows_no_link_and_stays_in_its_folder(plugin, harness, state_dir, tmp_path, ranks):
    """Links planted at the copy's temporary and final names (a shared logs folder) are replaced, never written
    through: the file they point to outside the folder is untouched, and the copy is a plain file of its own."""
    logs = tmp_path / "logs"
    outside = tmp_path / "outside.txt"
    outside.write_text("untouched")
    env = {"FORENSICS_RECORDER_DIR": str(state_dir), "NCCL_DEBUG_FILE": f"{logs}/nccl.log"}
    r = hang(harness, plugin, ranks, env)
    (live,) = state_dir.glob("nccl-recorder.*.bin")
    final, tmp = logs / live.name, logs / f"{live.name}.tmp"
    for name in (final, tmp):
        name.symlink_to(outside)
    os.kill(r.pid, signal.SIGABRT)  # the same copy routine as a finalize's
    assert r.proc.wait(timeout=10) == -signal.SIGABRT
    assert outside.read_text() == "untouched"
    assert not tmp.exists() and not tmp.is_symlink()
    assert final.is_file() and not final.is_symlink() and stat.S_IMODE(final.stat().st_mode) == 0o600
    assert read_recorder_file(final).death_copy
    assert sorted(p.name for p in tmp_path.iterdir()) == ["logs", "outside.txt", "shm"]


def test_copy_dir_none_turns_it_off(plugin, harness, state_dir, tmp_path, ranks):
    logs = tmp_path / "logs"
    env = {"FORENSICS_RECORDER_DIR": str(state_dir), "NCCL_DEBUG_FILE": f"{logs}/nccl.log",
           "FORENSICS_RECORDER_COPY_DIR": "none", "HARNESS_ABORT": "1"}
    r = hang(harness, plugin, ranks, env)
    os.kill(r.pid, signal.SIGABRT)
    assert r.proc.wait(timeout=10) == -signal.SIGABRT
    assert wait_for(lambda: True) and not list(tmp_path.rglob("logs/nccl-recorder.*"))


def test_a_copy_is_marked_and_never_read_as_a_frozen_process(plugin, harness, state_dir, tmp_path, ranks):
    """Copies are written as each rank dies, seconds apart: the older one is no SIGSTOPped process."""
    logs = tmp_path / "logs"
    env = {"FORENSICS_RECORDER_DIR": str(state_dir), "NCCL_DEBUG_FILE": f"{logs}/nccl.%h.%p.log",
           "FORENSICS_RECORDER_HEARTBEAT_MS": "50"}
    first = hang(harness, plugin, ranks, env, rank=0)
    second = hang(harness, plugin, ranks, env, rank=1)
    os.kill(first.pid, signal.SIGABRT)
    assert first.proc.wait(timeout=10) == -signal.SIGABRT
    time.sleep(1.5)  # 30 heartbeats: a live file this old would read as a frozen process
    os.kill(second.pid, signal.SIGABRT)
    assert second.proc.wait(timeout=10) == -signal.SIGABRT
    states, problems = read_recorder_dir(logs)
    assert problems == [] and len(states) == 2 and all(s.death_copy for s in states)
    assert not any(s.death_copy for s in read_recorder_dir(state_dir)[0])  # the /dev/shm files stay as written
    stall = analyse_comm(states)
    assert not any(rp.frozen for rp in stall.ranks.values())
    older = min(states, key=lambda s: s.heartbeat_ns)
    assert older.pid == first.pid  # its beat is the moment of its copy
