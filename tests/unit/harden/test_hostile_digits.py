"""Numbers of thousands of digits in pasted text (hostile or garbled) never fail a read.

Why: int() refuses strings over 4,300 digits (ValueError), and one such number in a gdb
backtrace, a py-spy dump, a Flight Recorder report or a ProcessGroupWrapper line would turn the
whole file into an unreadable artifact. The readers bound every number they convert.
"""

from __future__ import annotations

from pathlib import Path

from parsers.evidence import load_files

HUGE = "9" * 5000

LINES = [
    f"Thread 1 (Thread 0x7f16a03ad000 (LWP {HUGE})):",
    "#0  0x00007f169ee85534 in ?? () from /lib/x86_64-linux-gnu/libcuda.so",
    f"#1  0x00007f16a0b8d7bd in ncclLaunchKernel (comm=0x5624) at enqueue.cc:{HUGE}",
    f"Thread {HUGE} (active): \"MainThread\"",
    f"    all_reduce (torch/distributed/distributed_c10d.py:{HUGE})",
    f"Collective {HUGE} at entry 1 errors",
    "group info: 0:default_pg",
    f"missing ranks: {{{HUGE}}}",
    f"world size: {HUGE}",
    f"error msg: Culprit rank {HUGE}; Error type: SIZE_OR_SYNTAX_MISMATCH, Expected input sizes: '[[1]]'",
    f"Not all ranks joining collective, sequence number: {HUGE}",
    f"RuntimeError: Detected mismatch between collectives on ranks. Rank {HUGE} is running collective: "
    f"CollectiveFingerPrint(SequenceNumber={HUGE}, OpType=ALLREDUCE), but Rank 1 is running collective: REDUCE.",
    f"[I ProcessGroupWrapper.cpp:562] [Rank 3] Running collective: CollectiveFingerPrint(SequenceNumber={HUGE}, "
    "OpType=ALLREDUCE, TensorShape=[])",
    f"[rank2]:[E ProcessGroupNCCL.cpp:1] Received a dump signal due to a collective timeout from  rank {HUGE}",
]


def _read(tmp_path: Path, lines: list[str]):
    path = tmp_path / "pasted.log"
    path.write_text("\n".join(lines) + "\n")
    return load_files([(path, {})]).artifacts[0]


def test_every_line_at_once(tmp_path):
    art = _read(tmp_path, LINES)
    assert art.error is None and art.parsed is not None


def test_each_reader_on_its_own(tmp_path):
    """Each block alone, so each reader's sniff picks the file (gdb text, py-spy text, FR report)."""
    for block in (LINES[0:3], LINES[3:5], LINES[5:11], LINES[11:]):
        art = _read(tmp_path, block)
        assert art.error is None and art.parsed is not None, (block[0][:60], art.kind, art.error)
