"""c10d and gloo lines: field-notes lines (real, torch/NCCL on the device) and the real gloo fixtures."""

from pathlib import Path

from parsers.model.events import ErrorEvent, Origin, Progress
from parsers.readers import c10d, rank_log

GLOO = Path(__file__).resolve().parents[2] / "fixtures" / "gloo"

WATCHDOG = ("[rank0]:[E1129 07:18:19.556497288 ProcessGroupNCCL.cpp:689] [Rank 0] Watchdog caught collective "
            "operation timeout: WorkNCCL(SeqNum=11, OpType=ALLREDUCE, NumelIn=1048576, NumelOut=1048576, "
            "Timeout(ms)=45000) ran for 45092 milliseconds before timing out.")
FAILURE = ("[PG ID 0 PG GUID 0(default_pg) Rank 0]  failure detected by watchdog at work sequence id: 11 PG status: "
           "last enqueued work: 11, last completed work: 10")
CULPRIT = "Last enqueued NCCL work: 10, last completed NCCL work: 10"


def test_watchdog_timeout_line():
    out = rank_log.parse_lines([WATCHDOG + "\n"])
    err = next(e for e in out.events if isinstance(e, ErrorEvent))
    assert (err.kind, err.seq, err.op, err.comm, err.origin.rank) == ("watchdog-timeout", 11, "allreduce", "pg:0", 0)
    assert err.timestamp == "1129 07:18:19.556497288"
    prog = next(e for e in out.events if isinstance(e, Progress))
    assert (prog.last_enqueued, prog.last_completed) == (11, 10)


def test_failure_detected_and_culprit_counters():
    events = c10d.match_line(FAILURE, Origin())
    assert {type(e).__name__ for e in events} == {"ErrorEvent", "Progress"}
    prog = next(e for e in events if isinstance(e, Progress))
    assert (prog.comm, prog.last_enqueued, prog.last_completed, prog.comm_rank) == ("pg:0", 11, 10, 0)
    prog = c10d.match_line(CULPRIT, Origin())[0]
    assert (prog.last_enqueued, prog.last_completed) == (10, 10)


def test_pg_tag_forms():
    for tag, key in (("[PG 1 Rank 0]", "pg:1"), ("[PG 0 (default_pg) Rank 7]", "pg:0"),
                     ("[PG ID 11 PG GUID 119 Rank 1]", "pg:119"),
                     ("[PG ID 4 PG GUID 20(mesh_tp) Rank 1]", "pg:mesh_tp")):
        events = c10d.match_line(f"{tag}  {FAILURE.split(']  ', 1)[1]}", Origin())
        assert events[0].comm == key, tag


def test_real_gloo_errors_from_fixtures():
    kinds = {}
    for path in sorted(GLOO.glob("*/node0*/rank*.stderr")):
        out = rank_log.parse_lines(path.read_text().splitlines(True), str(path))
        for e in out.events:
            kinds.setdefault(e.kind, set()).add(path.parent.parent.name)
        assert out.unknown_lines <= 5, (path, out.unknown_lines)
        if "[rank" in path.read_text():
            assert out.facts["rank"] == int(path.stem[4:])
    assert "gloo-timeout" in kinds and "connection-closed" in kinds
    assert "connection-reset" in kinds  # kill: a peer's read fails with reset


def test_older_pytorch_forms():
    """Forms by era listed in field notes (public logs, PyTorch 1.x-2.3)."""
    old = ("[E ProcessGroupNCCL.cpp:737] [Rank 3] Watchdog caught collective operation timeout: "
           "WorkNCCL(OpType=ALLREDUCE, Timeout(ms)=1800000) ran for 1800406 milliseconds before timing out.")
    mid = ("[rank5]:[E ProcessGroupNCCL.cpp:563] [Rank 1] Watchdog caught collective operation timeout: "
           "WorkNCCL(SeqNum=42, OpType=_ALLGATHER_BASE, NumelIn=8, NumelOut=64, Timeout(ms)=600000) ran for "
           "600123 milliseconds before timing out.")
    out = rank_log.parse_lines([old, mid])
    errs = [e for e in out.events if isinstance(e, ErrorEvent)]
    assert [(e.seq, e.op) for e in errs] == [(None, "allreduce"), (42, "allgather")]
    assert errs[1].origin.rank == 5 and out.unknown_lines == 0


def test_hard_wrapped_watchdog_line_is_rejoined():
    """Public logs show hard wraps that split tokens (field notes: 'OpTy' / 'pe=')."""
    cut = WATCHDOG.index("OpTy") + 4
    out = rank_log.parse_lines([WATCHDOG[:cut] + "\n", WATCHDOG[cut:] + "\n"])
    err = next(e for e in out.events if isinstance(e, ErrorEvent))
    assert (err.kind, err.seq, err.op) == ("watchdog-timeout", 11, "allreduce")
    assert out.unknown_lines == 0 and out.facts["rejoined_lines"] == 1


def test_public_log_lines():
    log = Path(__file__).resolve().parents[2] / "fixtures" / "nccl" / "public-lines.log"
    lines = log.read_text().splitlines(True)
    out = rank_log.parse_lines(lines)
    assert out.unknown_lines == 0
    kinds = sorted((e.kind, e.origin.rank or -1) for e in out.events if isinstance(e, ErrorEvent))
    assert kinds == [("dump-signal", 6), ("heartbeat", 7), ("ib-completion", -1), ("terminate", 6),
                     ("watchdog-timeout", 2)]
    ib = next(e for e in out.events if isinstance(e, ErrorEvent) and e.kind == "ib-completion")
    assert ib.peer_addr == "10.153.235.13<40554>" and ib.timestamp == "2026-09-09 10:46:33"
    assert "rank" not in out.facts and out.facts["ranks"] == [2, 6, 7]


def test_network_plugin_error_under_last_error():
    """NCCL #1928 (NCCL 2.28.8, aws-ofi-nccl): the plugin's failed request, as PyTorch prints it under
    'Last error:' after ncclRemoteError; the real line, with its [rankN]: prefix."""
    line = ("[rank3]: NET/OFI Request 0x7f14cc5b60c0 completed with error. RC: 113. Error: 2 (UNDELIVERABLE). "
            "Completed length: 0\n")
    out = rank_log.parse_lines([line])
    err = next(e for e in out.events if isinstance(e, ErrorEvent))
    assert (err.kind, err.origin.rank, err.data.net, err.data.rc, err.data.error) == \
        ("net-error", 3, "OFI", 113, "UNDELIVERABLE")
    assert not out.unread
