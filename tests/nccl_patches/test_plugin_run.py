"""The plugin driven by the C harness the way NCCL drives it, decoded by the Python reader."""

from __future__ import annotations

import statistics

import pytest

from nccl_patches.harness import run_harness
from parsers.readers.recorder import (FLAG_SEND_WAIT_SAMPLED, ProxyOpRecord, RecorderState, read_recorder_dir,
                                      read_recorder_file)


@pytest.mark.parametrize("version", [2, 3, 4, 5, 6])
def test_every_interface_version_records_complete_ops(plugin, harness, state_dir, version):
    env = {"FORENSICS_RECORDER_DIR": str(state_dir), "HARNESS_NO_FINALIZE": "1"}
    done = run_harness(harness, plugin, version, ["run", "2", "40", "2", "4"], env)
    assert done.returncode == 0, done.stderr
    if version >= 4:  # v2/v3 hand init no logger
        assert f"hang-forensics recorder (profiler v{version})" in done.stderr  # the INFO line NCCL logs
    states, problems = read_recorder_dir(state_dir)
    assert problems == []
    # v2/v3 learn the comm's identity from its first Coll/P2p event
    assert sorted(s.comm_id for s in states) == [0x1000, 0x1001]
    for st in states:
        assert st.abi_version == version and st.writer == "profiler-plugin"
        assert st.comm_name == f"comm{st.comm_id - 0x1000}" and st.rank == st.comm_id - 0x1000
        if version >= 4:
            assert st.nranks == 4 and st.nnodes == 2
        else:
            assert st.nranks == -1 and st.nnodes == -1  # not given by these interfaces
        assert st.coll_next == 40 and len(st.colls) == 40
        assert [c.index for c in st.colls] == list(range(40))
        assert all(c.consistent and c.state == "complete" for c in st.colls)
        colls = [c for c in st.colls if c.kind == "coll"]
        p2ps = [c for c in st.colls if c.kind == "p2p"]
        assert len(p2ps) == 8 and [p.seq for p in p2ps] == list(range(8))
        c0 = colls[0]
        assert (c0.func, c0.dtype, c0.algo, c0.proto, c0.count) == ("AllReduce", "ncclFloat32", "RING", "SIMPLE",
                                                                    1 << 20)
        assert c0.n_channels == (2 if version >= 4 else 0)  # v2/v3 give only nMaxChannels
        assert (c0.proxy_started, c0.proxy_done, c0.kernel_started, c0.kernel_done) == (4, 4, 2, 2)
        assert c0.start_ns <= c0.enqueued_ns <= c0.complete_ns
        assert st.in_flight_ops == []
        # 32 colls x 2 channels x 2 ops + 8 p2p x 1 channel x 2 ops
        assert st.proxy_next == 32 * 4 + 8 * 2
        assert all(op.steps_done == op.n_steps == 4 for op in st.proxy_ops)
        # every record's names, across each switch between a collective's names and a p2p's (the writer
        # copies the previous record's when NCCL passes the same strings), and each proxy op's func its parent's
        assert {(c.func, c.dtype, c.algo, c.proto) for c in colls} == {("AllReduce", "ncclFloat32", "RING", "SIMPLE")}
        assert {(p.func, p.dtype, p.algo, p.proto) for p in p2ps} <= {("Send", "ncclInt8", "", ""),
                                                                     ("Recv", "ncclInt8", "", "")}
        by_index = {c.index: c for c in st.colls}
        assert st.proxy_ops and all(op.func == by_index[op.coll_index].func for op in st.proxy_ops)


@pytest.mark.parametrize("ring", [16, 10])
def test_full_ring_overwrites_the_oldest(plugin, harness, state_dir, ring):
    """A ring of 10 records leaves the proxy area on a 256-byte boundary only with padding (the
    plugin finds a step's op by rounding its address down): readers take proxy_offset as written."""
    env = {"FORENSICS_RECORDER_DIR": str(state_dir), "HARNESS_NO_FINALIZE": "1", "FORENSICS_RECORDER_RING": str(ring),
           "FORENSICS_RECORDER_PROXY_SLOTS": "32"}
    assert run_harness(harness, plugin, 5, ["run", "1", "100", "1", "2"], env).returncode == 0
    (st,), problems = read_recorder_dir(state_dir)
    assert problems == [] and st.coll_next == 100
    assert [c.index for c in st.colls] == list(range(100 - ring, 100))
    assert len(st.proxy_ops) == 32 and st.dropped_proxy == 0
    assert all(op.steps_done == op.n_steps == 2 and op.last_step == 1 for op in st.proxy_ops)


def test_many_threads_many_comms_stay_consistent(plugin, harness, state_dir):
    """4 communicators, each with a user and a proxy thread, all at once."""
    env = {"FORENSICS_RECORDER_DIR": str(state_dir), "HARNESS_NO_FINALIZE": "1"}
    assert run_harness(harness, plugin, 5, ["run", "4", "1500", "2", "3"], env).returncode == 0
    states, _ = read_recorder_dir(state_dir)
    assert len(states) == 4
    for st in states:
        assert st.coll_next == 1500 and len(st.colls) == 256
        assert all(c.state == "complete" and c.consistent for c in st.colls)
        assert st.proxy_next == 1200 * 4 + 300 * 2 and st.dropped_proxy == 0
        assert st.in_flight_ops == []


def test_clean_finalize_removes_state_and_leaves_a_snapshot(plugin, harness, state_dir):
    env = {"FORENSICS_RECORDER_DIR": str(state_dir)}
    assert run_harness(harness, plugin, 5, ["run", "1", "10", "1", "2"], env).returncode == 0
    assert list(state_dir.glob("*.bin")) == []
    (txt,) = state_dir.glob("nccl-recorder.*.txt")
    text = txt.read_text()
    assert "reason finalize" in text and "AllReduce seq 8" in text


def test_keep_leaves_the_finalized_state(plugin, harness, state_dir):
    env = {"FORENSICS_RECORDER_DIR": str(state_dir), "FORENSICS_RECORDER_KEEP": "1"}
    assert run_harness(harness, plugin, 5, ["run", "1", "10", "1", "2"], env).returncode == 0
    (path,) = state_dir.glob("*.bin")
    st = read_recorder_file(path)
    assert st.comm_state == "finalized" and st.finalize_ns >= st.start_ns


def test_unwritable_dir_fails_init_cleanly(plugin, harness, tmp_path):
    blocker = tmp_path / "a-file"
    blocker.write_text("")  # a directory cannot be made below a file, even by root
    env = {"FORENSICS_RECORDER_DIR": str(blocker / "sub")}
    done = run_harness(harness, plugin, 5, ["run", "1", "1", "1", "1"], env)
    assert done.returncode == 3  # the harness exits 3 when init fails, as NCCL would disable the plugin
    # wording is the behaviour: the plugin's one stderr line a user greps when NCCL disables it
    assert "hang-forensics recorder disabled: cannot create" in done.stderr


def test_missing_state_dir_is_created(plugin, harness, tmp_path):
    """Seen on the device: a configured directory that did not exist yet turned the recorder off."""
    target = tmp_path / "not" / "made" / "yet"
    env = {"FORENSICS_RECORDER_DIR": str(target), "HARNESS_NO_FINALIZE": "1"}
    done = run_harness(harness, plugin, 5, ["run", "1", "4", "2", "2"], env)
    assert done.returncode == 0, done.stderr
    states, problems = read_recorder_dir(target)
    assert problems == [] and len(states) == 1


def test_send_wait_is_timed_per_op(plugin, harness, state_dir):
    """Each send step stays 2 ms in SendWait, one after another: the op's send_wait_union_us is their
    time there together (the measure of a slow link), receives carry none, the header says which
    measure the field holds, and the old sum's field is left empty."""
    env = {"FORENSICS_RECORDER_DIR": str(state_dir), "HARNESS_NO_FINALIZE": "1", "HARNESS_SEND_WAIT_US": "2000"}
    done = run_harness(harness, plugin, 5, ["run", "1", "6", "1", "3"], env)
    assert done.returncode == 0, done.stderr
    (st,), problems = read_recorder_dir(state_dir)
    assert problems == [] and st.flags & 16 and not st.flags & 2
    sends = [op for op in st.proxy_ops if op.is_send]
    recvs = [op for op in st.proxy_ops if not op.is_send]
    assert sends and recvs
    for op in sends:  # 3 steps x 2 ms, plus the scheduler's lateness in usleep
        assert 3 * 2000 <= op.send_wait_union_us < 3 * 2000 + 60_000, op
        assert op.send_wait_us is None
    assert all(op.send_wait_union_us is None for op in recvs)


def test_send_wait_is_the_union_of_the_steps_intervals(plugin, harness, state_dir):
    """Steps on the network together count once, a time with none there not at all: step 0 alone
    20 ms, steps 0 and 1 together 150 ms, step 1 alone 20 ms, a 300 ms gap in SendGPUWait, step 2 alone
    20 ms. The union is 210 ms; the steps' sum would be 360 ms, first entry to last exit 510 ms."""
    env = {"FORENSICS_RECORDER_DIR": str(state_dir)}
    done = run_harness(harness, plugin, 5, ["overlap", "20000", "150000", "20000", "300000", "20000"], env)
    assert done.returncode == 0, done.stderr
    (st,), problems = read_recorder_dir(state_dir)
    (op,) = st.proxy_ops
    assert problems == [] and op.is_send and op.steps_done == 3
    assert 210_000 <= op.send_wait_union_us < 300_000, op  # usleep overshoots, never undershoots


def test_short_sequential_spans_add_up_to_their_time_and_stamp_steps_on_the_event_clock(plugin, harness, state_dir):
    """200 send steps one after another, each ~10.5 us in SendWait (a fast network), every span timed
    (FORENSICS_RECORDER_SEND_WAIT_EVERY=1): the union is read from the counter at each span's two edges
    and its sub-microsecond rests carry, so it lies between the
    harness's own inner and outer sums (each span's truncation to whole us would lose ~100 us). The steps
    are stamped on the event clock: each within its op's start and stop, which are on that clock too."""
    import time

    env = {"FORENSICS_RECORDER_DIR": str(state_dir), "FORENSICS_RECORDER_SEND_WAIT_EVERY": "1"}
    before = time.time_ns()
    done = run_harness(harness, plugin, 5, ["spans", "200", "10500"], env)
    after = time.time_ns()
    assert done.returncode == 0, done.stderr
    sums = dict(line.split() for line in done.stdout.splitlines() if line.endswith(tuple("0123456789")))
    inner, outer = int(sums["INNER_NS"]), int(sums["OUTER_NS"])
    (st,), problems = read_recorder_dir(state_dir)
    (op,) = st.proxy_ops
    assert problems == [] and op.is_send and op.steps_done == 200
    assert st.send_wait_every == 1 and not st.flags & FLAG_SEND_WAIT_SAMPLED
    assert inner // 1000 - 1 <= op.send_wait_union_us <= outer // 1000 + 1, (inner, outer, op.send_wait_union_us)
    slack = 20_000_000  # the event clock lags by its tick (4 ms) plus the heartbeat thread's wait for a CPU
    assert op.steps and all(op.start_ns <= s.ts_ns <= op.stop_ns for s in op.steps)
    assert all(before - slack <= s.ts_ns <= after for s in op.steps)


def _spans_run(harness, plugin, state_dir, steps: int, span_ns: int) -> tuple[float, ProxyOpRecord, RecorderState]:
    """One 'spans' harness run: (its inner and outer sums' mean in us, the send op, the file)."""
    for old in state_dir.glob("*"):
        old.unlink()
    done = run_harness(harness, plugin, 5, ["spans", str(steps), str(span_ns)],
                       {"FORENSICS_RECORDER_DIR": str(state_dir)})
    assert done.returncode == 0, done.stderr
    sums = dict(line.split() for line in done.stdout.splitlines() if line.endswith(tuple("0123456789")))
    (st,), problems = read_recorder_dir(state_dir)
    assert problems == []
    return (int(sums["INNER_NS"]) + int(sums["OUTER_NS"])) / 2000, st.proxy_ops[0], st


def test_one_step_spans_are_sampled_and_scaled_to_every_span(plugin, harness, state_dir):
    """By default one one-step span in 4 is timed and the others count as the mean of the timed ones: the
    header says so, and 40 spans of ~50 us each read within a fifth of the harness's own sum (median of 5
    runs: a span preempted on this shared machine weighs 4 if timed, nothing if not)."""
    errors = []
    for _ in range(5):
        truth_us, op, st = _spans_run(harness, plugin, state_dir, 40, 50_000)
        assert st.flags & FLAG_SEND_WAIT_SAMPLED and st.send_wait_every == 4
        assert op.is_send and op.steps_done == 40 and op.send_wait_union_us > 0
        errors.append(abs(op.send_wait_union_us - truth_us) / truth_us)
    assert statistics.median(errors) < 0.2, errors


@pytest.mark.parametrize("every", ["4", "1"])
def test_an_untimed_span_that_a_step_joins_is_timed_from_then(plugin, harness, state_dir, every):
    """Step 0 alone 20 ms (a timed one-step span), a 50 ms gap, step 1 alone 20 ms, steps 1 and 2 together
    30 ms, step 2 alone 10 ms: the union is 80 ms. Sampled (4), step 1's span opens untimed and is timed
    from step 2's entry; its lone 20 ms count as the op's timed one-step span (20 ms): 80 ms again. Every
    span timed (1): 80 ms as measured. Leaving the lone part out would read 60 ms; the gap in, 130 ms."""
    env = {"FORENSICS_RECORDER_DIR": str(state_dir), "FORENSICS_RECORDER_SEND_WAIT_EVERY": every}
    done = run_harness(harness, plugin, 5, ["join", "20000", "50000", "30000", "10000"], env)
    assert done.returncode == 0, done.stderr
    (st,), problems = read_recorder_dir(state_dir)
    (op,) = st.proxy_ops
    assert problems == [] and op.is_send and op.steps_done == 3
    assert 80_000 <= op.send_wait_union_us < 120_000, op  # usleep overshoots, never undershoots


def test_precise_stamps_are_wall_clock_times(plugin, harness, state_dir):
    """Op stamps and SendWait come from the CPU's tick counter, rebased on CLOCK_REALTIME: they must
    fall inside the run's wall-clock window, in order, like the precise clock's would."""
    import time

    env = {"FORENSICS_RECORDER_DIR": str(state_dir), "HARNESS_NO_FINALIZE": "1", "HARNESS_SEND_WAIT_US": "300"}
    before = time.time_ns()
    assert run_harness(harness, plugin, 5, ["run", "1", "30", "1", "3"], env).returncode == 0
    after = time.time_ns()
    (st,), _ = read_recorder_dir(state_dir)
    assert st.precise_op_times
    for c in st.colls:
        assert before <= c.start_ns <= c.enqueued_ns <= c.complete_ns <= after
    sends = [op for op in st.proxy_ops if op.direction == "send"]
    # 3 steps x 300 us in SendWait per send op, timed on the tick counter (sleep overshoots, never undershoots)
    assert sends and all(900 <= op.send_wait_union_us < 900 + 3 * 20_000 for op in sends)


@pytest.mark.parametrize("tick_ms", ["4", "0"])
def test_event_stamps_follow_the_wall_clock(plugin, harness, state_dir, tick_ms):
    """Proxy-op stamps come from the event clock: the heartbeat thread's published time while
    events come (FORENSICS_RECORDER_TICK_MS=4), the vDSO's coarse clock with 0. Either way they
    fall inside the run's wall-clock window (less the coarse clock's tick), advance with it, and
    each op's stop lags its collective's precise completion, read right after it, by no more than
    a tick plus the heartbeat thread's wait for a CPU."""
    import time

    env = {"FORENSICS_RECORDER_DIR": str(state_dir), "HARNESS_NO_FINALIZE": "1", "HARNESS_SEND_WAIT_US": "2000",
           "FORENSICS_RECORDER_TICK_MS": tick_ms}
    before = time.time_ns()
    assert run_harness(harness, plugin, 5, ["run", "1", "40", "1", "3"], env).returncode == 0
    after = time.time_ns()
    (st,), _ = read_recorder_dir(state_dir)
    ops = st.proxy_ops
    assert len(ops) == 80 and all(op.stop_ns for op in ops)
    slack = 20_000_000  # the coarse clock lags by its tick (1-4 ms); the published one by up to tick_ms more
    assert all(before - slack <= op.start_ns <= op.stop_ns <= after for op in ops)
    # 40 collectives, each with 3 send steps of 2 ms in SendWait: the stamps span most of that
    assert max(op.stop_ns for op in ops) - min(op.start_ns for op in ops) >= 40 * 3 * 2_000_000 * 0.8
    by_index = {c.index: c for c in st.colls}
    lags = [by_index[op.coll_index].complete_ns - op.stop_ns for op in ops if op.coll_index in by_index]
    assert len(lags) == 80 and min(lags) >= -1_000_000 and max(lags) < 250_000_000


def test_event_clock_stops_when_idle_and_comes_back(plugin, harness, state_dir):
    """Each send step waits 300 ms in SendWait, so the proxy thread records nothing for longer than
    the 100 ms after which the heartbeat thread stops publishing the event clock; the next events
    read the vDSO and start it again. No stamp may carry the time from before a pause: each op's
    stop stays within 100 ms of its collective's precise completion (a stale clock: 300 ms or more)."""
    env = {"FORENSICS_RECORDER_DIR": str(state_dir), "HARNESS_NO_FINALIZE": "1", "HARNESS_SEND_WAIT_US": "300000"}
    assert run_harness(harness, plugin, 5, ["run", "1", "3", "1", "1"], env).returncode == 0
    (st,), _ = read_recorder_dir(state_dir)
    by_index = {c.index: c for c in st.colls}
    lags = [by_index[op.coll_index].complete_ns - op.stop_ns for op in st.proxy_ops]
    assert len(lags) == 6 and all(-1_000_000 <= lag < 100_000_000 for lag in lags), lags
    sends = [op for op in st.proxy_ops if op.is_send]
    assert all(300_000 <= op.send_wait_union_us < 600_000 for op in sends)
