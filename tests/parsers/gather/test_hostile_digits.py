"""Numbers of thousands of digits in pasted text (hostile or garbled) never fail a read.

Why: int() refuses strings over 4,300 digits (ValueError), and one such number in a gdb
backtrace, a py-spy dump, a Flight Recorder report or a ProcessGroupWrapper line would turn the
whole file into an unreadable artifact. The readers bound every number they convert.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from parsers.gather.evidence import load_files

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


#: each block's first lines are what its reader's sniff looks for; the later lines carry the huge numbers
GDB = ["Thread 1 (Thread 0x7f16a03ad000 (LWP 4242)):",
       "#0  0x00007f169ee85534 in ?? () from /lib/x86_64-linux-gnu/libcuda.so",
       f"#1  0x00007f16a0b8d7bd in ncclLaunchKernel (comm=0x5624) at enqueue.cc:{HUGE}",
       f"Thread 2 (Thread 0x7f16a03ae000 (LWP {HUGE})):"]
PYSPY = ['Thread 4242 (active): "MainThread"',
         f"    all_reduce (torch/distributed/distributed_c10d.py:{HUGE})",
         "    main (train.py:12)",
         f'Thread {HUGE} (idle): "worker"']
FR_REPORT = ["Collective 7 at entry 1 errors", "group info: 0:default_pg", f"missing ranks: {{{HUGE}}}",
             f"world size: {HUGE}", f"Collective {HUGE} at entry 2 errors", "group info: 0:default_pg"]
C10D = [*LINES[11:],
        "[rank2]:[E ProcessGroupNCCL.cpp:1] Received a dump signal due to a collective timeout from  rank 3"]


@pytest.mark.parametrize("block, kind", [(GDB, "gdb-text"), (PYSPY, "pyspy-text"), (FR_REPORT, "fr-report"),
                                         (C10D, "rank-log")])
def test_each_reader_on_its_own(tmp_path, block, kind):
    """Each block alone goes to its own reader (its sniff picks the file despite the huge numbers below the
    first lines), which reads the sane lines and skips each line with a huge number as unknown."""
    art = _read(tmp_path, block)
    assert (art.kind, art.error) == (kind, None)
    assert art.parsed.unknown_lines >= 1, art.parsed.unknown_lines
    if kind == "gdb-text":
        (stack,) = art.parsed.stacks
        assert [(f.function, f.line) for f in stack.frames] == [("??", None), ("ncclLaunchKernel", None)]
        assert art.parsed.facts["pid"] == 4242
    elif kind == "pyspy-text":
        (stack,) = art.parsed.stacks
        assert [(f.function, f.line) for f in stack.frames] == [("all_reduce", None), ("main", 12)]
    elif kind == "fr-report":
        assert [(e.kind, e.seq) for e in art.parsed.events] == [("fr-analysis", 7)]
    else:
        assert [e.kind for e in art.parsed.events] == ["dump-signal"]


def test_a_c10d_or_nccl_line_with_a_huge_number_is_skipped_and_the_rest_is_read(tmp_path):
    """The line readers (rank log, NCCL log) skip such a line (counted unknown) and read the others."""
    good = ("[rank0]:[E ProcessGroupNCCL.cpp:616] [Rank 0] Watchdog caught collective operation timeout: "
            "WorkNCCL(SeqNum=5, OpType=ALLREDUCE, NumelIn=1, NumelOut=1, Timeout(ms)=600000) ran for 600002 "
            "milliseconds before timing out.")
    bad = [good.replace("SeqNum=5", f"SeqNum={HUGE}"),
           f"h1:{HUGE}:1 [0] NCCL INFO AllReduce: opCount 1 sendbuff 0x1 recvbuff 0x1 count 1 datatype 7 op 0 root 0 "
           "comm 0x55 [nranks=2] stream 0x1",
           f"h1:12:12 [0] NCCL INFO comm 0x55d0 rank {HUGE} nranks 4 cudaDev 0 busId 1000 commId "
           f"0xdeadbeef - Init COMPLETE"]
    art = _read(tmp_path, [*bad, good])
    assert art.error is None
    kinds = [(e.kind, e.seq) for e in art.parsed.events if getattr(e, "kind", None) == "watchdog-timeout"]
    assert kinds == [("watchdog-timeout", 5)] and art.parsed.unknown_lines >= 3
