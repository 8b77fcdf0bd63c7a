"""The second look's cheap reads on real files and a real process: this test's own /proc, and a real NCCL
log (tests/fixtures/nccl/kill, NCCL 2.28.9) that grows between the looks as a running rank's would."""

from __future__ import annotations

import os

from hf_testpaths import FIXTURES
from forensics.collectors import second_look as sl
from nccl_patches.harness import start_hanging_rank
from parsers.readers.second_look import parse_second_look_data

NCCL_LOG = FIXTURES / "nccl" / "kill" / "node06" / "nccl.node06.869.log"


def test_proc_look_reads_state_cpu_io_and_threads_of_a_live_process():
    look = sl.proc_look(os.getpid())
    assert look["state"] in ("R", "S") and look["cpu_ticks"] >= 0 and look["threads"]
    assert set(look["io"]) <= set(sl.IO_KEYS) and "syscw" in look["io"]
    assert sl.proc_look(2 ** 22 + 12345) is None  # no such process: gone, not an error


def test_new_nccl_op_lines_are_counted_from_where_the_first_look_left_the_log(tmp_path):
    lines = NCCL_LOG.read_bytes().splitlines(keepends=True)
    cut = next(i for i, line in enumerate(lines) if b"opCount" in line) + 5  # a few ops logged by look 1
    log = tmp_path / "nccl.host.%p.log"
    real = tmp_path / f"nccl.host.{os.getpid()}.log"
    real.write_bytes(b"".join(lines[:cut]))
    sources = sl._Sources(os.getpid(), {"NCCL_DEBUG_FILE": str(log)})
    assert sources.log is not None and sources.log.name == real.name
    first = sl._log_size(os.getpid(), sources.log)
    with open(real, "ab") as fh:
        fh.write(b"".join(lines[cut:cut + 900]))
    added = sum(1 for line in lines[cut:cut + 900] if b"opCount" in line)
    assert added > 0
    count, read = sl._new_op_lines(os.getpid(), sources.log, first)
    assert count == added and read == len(b"".join(lines[cut:cut + 900]))


def test_a_grown_log_is_progress_to_the_reader(tmp_path):
    doc = {"format": "hang-forensics-second-look", "version": 1, "pid": 1, "rank": 0, "requested_gap_s": 3.0,
           "looks": [{"t": 100.0, "proc": {"state": "S"}, "nccl_log": {"file": "x", "size": 10}},
                     {"t": 103.0, "proc": {"state": "S"}, "nccl_log": {"file": "x", "size": 900, "new_op_lines": 4}}]}
    got = parse_second_look_data(doc)
    assert got.comparable and len(got.changes) == 1 and "4 NCCL op line" in got.changes[0] and got.waited_s == 3.0


def test_a_recorder_state_file_of_the_process_decides_without_a_second_look(plugin, harness, state_dir, ranks):
    """Issue 39 item 8: the recorder's stamps decide hang or progress, so its rank gets no second look."""
    env = {"FORENSICS_RECORDER_DIR": str(state_dir)}
    r = start_hanging_rank(harness, plugin, 5, 0, 2, 3, 3, 16, 10, 0, env)
    ranks.append(r)
    assert sl.stamps_decide(r.pid, env, 0) is not None
    assert sl.stamps_decide(os.getpid(), env, 0) is None  # another process's state files decide nothing here


def test_a_flight_recorder_dump_of_this_run_decides_an_older_one_does_not(tmp_path):
    prefix = tmp_path / "fr_trace_rank_"
    env = {"TORCH_FR_DUMP_TEMP_FILE": str(prefix), "FORENSICS_RECORDER_DIR": str(tmp_path / "none")}
    dump = tmp_path / "fr_trace_rank_3"
    dump.write_bytes(b"\x80\x04}")  # the content is not read: its name and time are the evidence
    assert sl.stamps_decide(os.getpid(), env, 3) is not None
    assert sl.stamps_decide(os.getpid(), env, 4) is None  # no dump of rank 4
    os.utime(dump, (1_000_000_000, 1_000_000_000))  # from before this process started: a previous run's
    assert sl.stamps_decide(os.getpid(), env, 3) is None
