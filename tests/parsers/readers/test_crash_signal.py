"""A runtime's fatal-signal report names the process that died (parsers/readers/crash_signal.py).

The lines are real: NVIDIA/nccl#1669 (Open MPI's handler, NCCL 2.26.2; the whole excerpt is
tests/fixtures/realworld/nccl-1669.log) and NVIDIA/nccl#1996 (UCX's handler, NCCL 2.27.7,
https://github.com/NVIDIA/nccl/issues/1996, case 1 of the description).
"""

from __future__ import annotations

from pathlib import Path

from parsers.gather.evidence import load_files
from parsers.model.events import CrashSignal, Origin
from parsers.readers import crash_signal, textline

REALWORLD = Path(__file__).resolve().parents[2] / "fixtures" / "realworld"
UCX_LINE = ("[n125-011-039:288505:0:296459] Caught signal 11 (Segmentation fault: address not mapped to object at "
            "address 0x48)")


def _signals(path: Path) -> list:
    loaded = load_files([(path, {})])
    return [e for a in loaded.artifacts if a.parsed
            for e in a.parsed.events if getattr(e, "kind", "") == crash_signal.KIND]


def test_open_mpi_banner_inside_an_nccl_log_is_the_crash_of_its_process():
    found = _signals(REALWORLD / "nccl-1669.log")
    assert [(e.origin.host, e.origin.pid, e.origin.line) for e in found] == [("rtptest1621", 405884, 10)]
    assert found[0].data.handler == "open-mpi"


def test_ucx_line_gives_host_pid_and_signal_and_keeps_a_launcher_rank():
    (ev,) = textline.match_text(UCX_LINE, Origin(rank=7, file="f", line=3))
    assert (ev.kind, ev.origin.host, ev.origin.pid, ev.origin.rank, ev.origin.line) == (
        crash_signal.KIND, "n125-011-039", 288505, 7, 3)
    assert ev.data == CrashSignal("ucx", 11, "Segmentation fault")


def test_other_signal_lines_are_not_a_crash_report():
    # a launcher sending SIGTERM stays the launcher's (tests/fixtures/realworld has many); prose is nothing
    assert textline.match_text("Sending process 340264 closing signal SIGTERM", Origin())[0].kind == "launcher-signal"
    assert crash_signal.match_line("the process received signal 11 at some point", Origin()) == []
    assert crash_signal.match_line("[" + "a" * 300 + ":1] *** Process received signal ***", Origin()) == []
