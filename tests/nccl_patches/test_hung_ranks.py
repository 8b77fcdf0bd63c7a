"""Four harness 'ranks' hang in one all-reduce; one is SIGSTOPped. Read them live, name it.

Ring: rank r sends to r+1 and receives from r-1. The culprit (rank 2) entered the
collective and then stopped: its peers' ops wait on it (rank 3 RecvWait on 2,
rank 1 SendPeerWait on 2). Op counts alone cannot tell: every rank entered seq 10.
"""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path

import pytest

from parsers.model.manifest import Status
from forensics.collectors.base import CollectOptions, RankTarget
from forensics.collectors.recorder import RecorderCollector
from nccl_patches.harness import start_hanging_rank
from parsers.readers.recorder import read_recorder_dir, read_recorder_file
from parsers.judges.recorder import analyse, stalled_ranks, wait_edges
from proc_stat import state_letter

RECV_WAIT, SEND_PEER_WAIT, SEND_GPU_WAIT = 10, 20, 8
# per rank: recv steps done, send steps done, recv state, send state
PLAN = {0: (6, 16, RECV_WAIT, 0), 1: (16, 4, 0, SEND_PEER_WAIT), 2: (3, 3, RECV_WAIT, SEND_GPU_WAIT),
        3: (3, 16, RECV_WAIT, 0)}

pytestmark = pytest.mark.integration


@pytest.fixture
def hung_job(plugin, harness, state_dir, ranks):
    env = {"FORENSICS_RECORDER_DIR": str(state_dir), "FORENSICS_RECORDER_HEARTBEAT_MS": "50"}
    for r, (rs, ss, rst, sst) in PLAN.items():
        ranks.append(start_hanging_rank(harness, plugin, 5, r, 4, 10, rs, ss, rst, sst, env))
    ranks[2].stop()
    time.sleep(1.0)  # > 10 heartbeats of 50 ms: the stopped rank's beat is stale, the others' fresh
    return ranks


def test_reads_a_stopped_rank_without_waking_it(hung_job, state_dir):
    culprit = hung_job[2]
    assert state_letter(culprit.pid) == "T"
    (path,) = state_dir.glob(f"nccl-recorder.*.{culprit.pid}.0.bin")
    st = read_recorder_file(path)
    assert state_letter(culprit.pid) == "T"  # reading did not signal or resume it
    assert st.pid == culprit.pid and st.rank == 2 and st.env_rank == 2
    assert st.heartbeat_age_s() > 0.5
    last = st.colls[-1]
    assert (last.func, last.seq, last.state) == ("AllReduce", 10, "in-flight")
    ops = {op.direction: op for op in st.in_flight_ops}
    assert ops["recv"].peer == 1 and ops["recv"].last_state == "RecvWait" and ops["recv"].steps_done == 3
    assert ops["send"].peer == 3 and ops["send"].last_state == "SendGPUWait"
    assert ops["recv"].n_steps == 16 and ops["recv"].coll_seq == 10


def test_wait_edges_and_the_named_culprit(hung_job, state_dir):
    states, problems = read_recorder_dir(state_dir)
    assert problems == [] and len(states) == 4
    edges = {(e.waiter, e.peer, e.state) for e in wait_edges(states)}
    assert (3, 2, "RecvWait") in edges and (1, 2, "SendPeerWait") in edges and (0, 3, "RecvWait") in edges
    assert all(e.source == "recorder" and e.op == "AllReduce seq 10" for e in wait_edges(states))
    from parsers.judges.recorder import comm_rank_table
    assert comm_rank_table(states) == {"0xabcdef12345678": {0: 0, 1: 1, 2: 2, 3: 3}}
    (stall,) = analyse(states)
    assert stall.op == "AllReduce seq 10"
    assert all(rp.entered for rp in stall.ranks.values())  # op counts alone see nothing wrong
    top = stalled_ranks(states)[0]
    assert (top.rank, top.pid, top.reason_class) == (2, hung_job[2].pid, "entered-then-frozen")
    assert "stopped progressing" in top.reason
    # judged a minute later (every beat stale, e.g. a post-mortem bundle): still the one that stopped first
    later = stalled_ranks(states, now_ns=time.time_ns() + 60 * 10**9)
    assert later[0].pid == hung_job[2].pid
    assert [s.reason_class for s in later].count("entered-then-frozen") == 1


def test_signal_writes_a_text_snapshot(hung_job, state_dir):
    live = hung_job[3]
    os.kill(live.pid, signal.SIGUSR2)
    txt = next(state_dir.glob(f"nccl-recorder.*.{live.pid}.0.bin")).with_suffix(".txt")
    deadline = time.monotonic() + 10
    while not txt.exists() and time.monotonic() < deadline:
        time.sleep(0.05)
    text = txt.read_text()
    assert "reason signal" in text
    assert any(all(f in line for f in ("channel 0", "peer 2", "RecvWait", "step 3",
                                       "3/16")) for line in text.splitlines()), text
    assert live.proc.poll() is None  # the signal did not kill it


def test_collector_copies_state_into_the_bundle(hung_job, state_dir, tmp_path):
    culprit = hung_job[2]
    bundle = tmp_path / "bundle"
    target = RankTarget(pid=culprit.pid, host="h", rank=2, environ={"FORENSICS_RECORDER_DIR": str(state_dir),
                        "NCCL_PROFILER_PLUGIN": "x.so"}, bundle_root=bundle, rel_dir="ranks/2")
    rec = RecorderCollector().collect(target, CollectOptions())
    assert rec.status == Status.OK and rec.files == [f"ranks/2/recorder/{p.name}" for p in
                                                     sorted(state_dir.glob(f"*.{culprit.pid}.*"))]
    copied = bundle / rec.files[0]
    st = read_recorder_file(copied, observed_ns=rec.details["copied_ns"][rec.files[0]])
    assert st.pid == culprit.pid and st.heartbeat_age_s() > 0.5
    assert state_letter(culprit.pid) == "T"


def test_collector_skips_a_rank_without_recorder(state_dir, tmp_path):
    target = RankTarget(pid=os.getpid(), host="h", rank=0, environ={"FORENSICS_RECORDER_DIR": str(state_dir)},
                        bundle_root=tmp_path, rel_dir="ranks/0")
    rec = RecorderCollector().collect(target, CollectOptions())
    assert rec.status == Status.SKIPPED and "NCCL_PROFILER_PLUGIN is not set" in rec.error


def test_full_proxy_pool_drops_new_ops_and_keeps_in_flight_ones(plugin, harness, state_dir, ranks):
    env = {"FORENSICS_RECORDER_DIR": str(state_dir), "FORENSICS_RECORDER_PROXY_SLOTS": "16",
           "HARNESS_EXTRA_OPEN_OPS": "20", "HARNESS_PXN": "1"}
    ranks.append(start_hanging_rank(harness, plugin, 5, 0, 2, 2, 1, 1, RECV_WAIT, SEND_PEER_WAIT, env))
    (st,), _ = read_recorder_dir(state_dir)
    # 2 x 2 finished ops freed their slots; then 2 + 20 + 1 ops stay open: 16 fit, the rest are counted
    assert len(st.in_flight_ops) == 16
    assert st.dropped_proxy == 2 + 20 + 1 - 16
    assert st.proxy_next == 4 + 23


def test_pxn_op_from_another_process_is_kept_without_its_parent(plugin, harness, state_dir, ranks):
    env = {"FORENSICS_RECORDER_DIR": str(state_dir), "HARNESS_PXN": "1"}
    r = start_hanging_rank(harness, plugin, 5, 0, 2, 1, 1, 1, RECV_WAIT, SEND_PEER_WAIT, env)
    ranks.append(r)
    (st,), _ = read_recorder_dir(state_dir)
    pxn = [op for op in st.in_flight_ops if op.pid != r.pid]
    assert len(pxn) == 1 and pxn[0].coll_index is None and pxn[0].func == "" and pxn[0].last_state == "SendWait"


def test_snapshot_signal_chains_to_the_applications_handler(plugin, harness, state_dir, ranks):
    env = {"FORENSICS_RECORDER_DIR": str(state_dir), "HARNESS_OWN_SIGUSR2": "1"}
    r = start_hanging_rank(harness, plugin, 5, 0, 2, 1, 1, 1, RECV_WAIT, SEND_PEER_WAIT, env)
    ranks.append(r)
    os.kill(r.pid, signal.SIGUSR2)
    txt = next(state_dir.glob("*.bin")).with_suffix(".txt")
    deadline = time.monotonic() + 10
    while not txt.exists() and time.monotonic() < deadline:
        time.sleep(0.05)
    assert "reason signal" in txt.read_text()
    r.kill()
    # verbatim input: the harness's own line
    assert "harness own SIGUSR2 handler ran" in r.proc.stderr.read()


def test_finalize_mid_hang_keeps_state_and_tolerates_late_stops(plugin, harness, state_dir, ranks):
    env = {"FORENSICS_RECORDER_DIR": str(state_dir), "HARNESS_ABORT": "1"}
    r = start_hanging_rank(harness, plugin, 5, 0, 2, 1, 2, 2, RECV_WAIT, SEND_PEER_WAIT, env)
    ranks.append(r)
    assert r.proc.poll() is None  # late stopEvent calls after finalize did not crash it
    (path,) = state_dir.glob("*.bin")
    st = read_recorder_file(path)
    assert st.comm_state == "finalized" and st.colls[-1].state == "in-flight"
    lines = path.with_suffix(".txt").read_text().splitlines()
    assert any("reason finalize" in line and "in flight" in line for line in lines)


def test_cli_read_names_the_stopped_rank(hung_job, state_dir):
    import subprocess
    import sys

    repo = Path(__file__).resolve().parents[2]
    out = subprocess.run([sys.executable, "-m", "forensics", "recorder", "read", str(state_dir)],
                         capture_output=True, text=True, timeout=60, env={**os.environ, "PYTHONPATH": str(repo)})
    assert out.returncode == 0, out.stderr
    assert "stuck op AllReduce seq 10" in out.stdout
    assert "rank 3 -> rank 2 ch 0 RecvWait" in out.stdout
    first = next(line for line in out.stdout.splitlines() if line.strip().startswith("suspect"))
    assert f"pid {hung_job[2].pid}" in first and "entered-then-frozen" in first


def test_reading_while_the_writer_runs_never_yields_torn_records(plugin, harness, state_dir):
    """The seqlock at work: read the files over and over while 2 comms write 200000 ops each."""
    import subprocess

    env = {**os.environ, "FORENSICS_RECORDER_DIR": str(state_dir), "HARNESS_NO_FINALIZE": "1"}
    proc = subprocess.Popen([str(harness), str(plugin), "5", "run", "2", "200000", "2", "2"], env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
    reads = checked = 0
    try:
        while proc.poll() is None or reads == 0:
            for path in state_dir.glob("*.bin"):  # files appear whole (made under .tmp, renamed)
                st = read_recorder_file(path)
                reads += 1
                for c in st.colls:
                    if c.consistent:
                        checked += 1
                        assert (c.func, c.count) in {("AllReduce", 1 << 20), ("Send", 1024)}
                        assert c.kind == ("p2p" if c.func == "Send" else "coll")
                for op in st.proxy_ops:
                    assert op.consistent is False or op.n_steps == 2
    finally:
        proc.kill()
        proc.wait(timeout=10)
    assert reads > 3 and checked > 0


def test_bundle_round_trip_through_manifest_records(hung_job, state_dir, tmp_path):
    from parsers.gather.evidence import load
    from parsers.model.manifest import Manifest, RankRecord
    from parsers.gather.source import Source, manifest_refs

    bundle = tmp_path / "bundle"
    records = []
    for r in hung_job:
        target = RankTarget(pid=r.pid, host="h", rank=r.rank, environ={"FORENSICS_RECORDER_DIR": str(state_dir)},
                            bundle_root=bundle, rel_dir=f"ranks/{r.rank}")
        rr = RankRecord(host="h", pid=r.pid, dir=f"ranks/{r.rank}", rank=r.rank)
        rr.collectors.append(RecorderCollector().collect(target, CollectOptions()))
        records.append(rr)
    src = Source(root=bundle, given=bundle, form="bundle",
                 manifest=Manifest(created="now", tool_version="test", ranks=records))
    src.files = manifest_refs(src, src.manifest)
    ev = load(src)
    states, problems = ev.recorder, ev.problems
    assert problems == [] and sorted(s.rank for s in states) == [0, 1, 2, 3]
    assert all(s.observed_ns for s in states)
    assert stalled_ranks(states)[0].pid == hung_job[2].pid
