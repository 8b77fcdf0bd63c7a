"""NCCL log reader on real lines (field notes: measured on NCCL 2.28.9 and seen in public logs)."""

from pathlib import Path

from parsers.model.events import CommMember, ErrorEvent, OpEvent, TopoEdge
from parsers.readers import nccl_log

FIX = Path(__file__).resolve().parents[2] / "fixtures" / "nccl" / "field-notes" / "lines.log"
NCCL = Path(__file__).resolve().parents[2] / "fixtures" / "nccl"


def parse(lines):
    return nccl_log.parse_lines(lines, "t.log")


def test_field_notes_lines():
    out = parse(FIX.read_text().splitlines())
    assert out.unknown_lines == 0
    member = next(e for e in out.events if isinstance(e, CommMember))
    assert (member.comm, member.comm_rank, member.nranks) == ("0xa7869d7d53387980", 2, 4)
    op = next(e for e in out.events if isinstance(e, OpEvent))
    assert (op.op, op.seq, op.count, op.dtype, op.comm, op.comm_rank) == (
        "allreduce", 10, 1048576, "float32", "0xa7869d7d53387980", 2)
    edges = {(e.kind, e.src, e.dst) for e in out.events if isinstance(e, TopoEdge)}
    assert ("ring", 1, 2) in edges and ("ring", 2, 3) in edges and ("tree", 2, 0) in edges
    warn = next(e for e in out.events if isinstance(e, ErrorEvent))
    assert warn.kind == "connection-closed" and warn.peer_addr == "localhost<33187>"
    assert warn.timestamp == "2026-11-29 07:25:41"
    assert out.facts["rank"] == 2 and out.facts["host"] == "vm" and out.facts["pid"] == 495


def test_old_formats():
    lines = [
        "h1:10:10 [0] NCCL INFO comm 0x55d0 rank 0 nranks 4 cudaDev 0 busId 1000 commId 0xdeadbeef - Init COMPLETE",
        "h1:10:10 [0] NCCL INFO Channel 00/02 :    0   1   2   3",
        "h1:10:10 [0] NCCL INFO Trees [0] 1/-1/-1->0->-1 [1] -1/-1/-1->0->2",
        "h1:10:20 [0] NCCL INFO Channel 00/0 : 1[0] -> 2[0] [send] via NET/IB/0",
        "h1:10:30 [0] transport/net_ib.cc:1295 NCCL WARN NET/IB : Got completion from peer 10.0.0.5<12345> with "
        "status=12 opcode=0 len=0 vendor err 129 (Send)",
    ]
    out = parse(lines)
    assert out.unknown_lines == 0
    edges = {(e.kind, e.src, e.dst) for e in out.events if isinstance(e, TopoEdge)}
    assert ("ring", 3, 0) in edges and ("tree", 1, 0) in edges and ("channel", 1, 2) in edges
    err = next(e for e in out.events if isinstance(e, ErrorEvent))
    assert err.kind == "ib-completion" and err.peer_addr == "10.0.0.5<12345>"


def test_glued_and_broken_lines_resynchronise():
    a = ("vm:495:495 [0] NCCL INFO ncclCommInitRankConfig comm 0x2be77720 rank 2 nranks 4 cudaDev 0 nvmlDev 0 "
         "busId 60 commId 0xa7869d7d53387980 - Init START")
    b = ("vm:495:495 [0] NCCL INFO AllReduce: opCount b sendbuff 0x1 recvbuff 0x1 count 8 datatype 7 op 0 root 0 "
         "comm 0x2be77720 [nranks=4] stream (nil)")
    out = parse(["garbage before " + a + b, "Ty", "terminate called after throwing an instance of 'c10::Error'"])
    ops = [e for e in out.events if isinstance(e, OpEvent)]
    assert len(ops) == 1 and ops[0].seq == 11 and ops[0].comm == "0xa7869d7d53387980"
    assert out.unknown_lines == 1  # 'Ty'; the terminate line is a PyTorch line, read even in an NCCL log
    assert [e.data.type for e in out.events if getattr(e, "kind", "") == "python-exception"] == ["c10::Error"]


def test_split_comm_keyed_by_parent_and_color():
    """Real lines (NCCL 2.28.9, chain scenario): pg_B is splitCount 2 on rank 1 but splitCount 1 on rank 2,
    since rank 2 never took part in pg_A's split. Parent commId and color name the comm on both."""
    keys = {}
    for node in ("node01", "node02"):
        log = next((NCCL / "chain" / node).glob("nccl.*.log"))
        lines = [ln for ln in log.read_text().splitlines() if "ncclCommSplit" in ln or "commId" in ln
                 or " opCount " in ln]
        out = parse(lines)
        keys[node] = {(m.nranks, m.comm_rank): m.comm for m in out.events if isinstance(m, CommMember)}
        assert out.facts["world_size"] == 8
    parent = "0xb256a2985bf845f8"
    assert keys["node01"][(2, 0)] == keys["node02"][(2, 1)] == f"{parent}/color1604346045"  # pg_B
    assert keys["node02"][(2, 0)] == f"{parent}/color1121016176"  # pg_C
    split = ("node01:1222:1222 [0] NCCL INFO ncclCommSplit comm 0x4cd025c0 rank 0 nranks 2 cudaDev 0 nvmlDev 0 "
             "busId 60 parent 0x452f3db0 splitCount 2 color 1604346045 key 0- Init START")
    assert split in (NCCL / "chain" / "node01" / "nccl.node01.1222.log").read_text()


def test_wording_across_versions():
    """Variants listed in field notes: 2.13 'Net :' closures, 2.30 '(function)' in WARN, error trails,
    'NCCL version' with and without prefix, Abort COMPLETE, service-thread closures."""
    lines = [
        "NCCL version 2.18.3+cuda12.2",
        "h1:10:10 [0] NCCL INFO NCCL version 2.28.9+cuda13.0",
        "h1:10:40 [0] include/socket.h:423 NCCL WARN Net : Connection closed by remote peer h2<36466>",
        "[2026-11-29 07:25:41] h1:10:41 [0] misc/socket.cc:72 (socketProgress) NCCL WARN socketProgress: "
        "Connection closed by remote peer h3<33187>",
        "h1:10:42 [0] NCCL INFO transport/net.cc:1018 -> 6",
        "h1:10:42 [0] NCCL INFO proxy.cc:874 -> 6 [Progress Thread]",
        "h1:10:43 [0] misc/socket.cc:50 NCCL WARN [Service thread] Connection closed by localRank 3",
        "h1:10:10 [0] NCCL INFO comm 0x55d0 rank 0 nranks 4 cudaDev 0 busId 1000 - Abort COMPLETE",
    ]
    out = parse(lines)
    assert out.unknown_lines == 0 and out.facts["nccl_version"] == "2.28.9+cuda13.0"
    closed = [e for e in out.events if isinstance(e, ErrorEvent) and e.kind == "connection-closed"]
    assert [e.peer_addr for e in closed] == ["h2<36466>", "h3<33187>", "3"]
    assert closed[1].timestamp == "2026-11-29 07:25:41"
    assert out.facts["error_trails"] == 2


def test_launcher_labels_name_the_files_ranks():
    """Real lines (horovod/horovod#3658 and #3752): mpirun's `[1,N]<stdout>:` label is each line's global
    rank, so a merged NCCL log reports those ranks, and a one-rank paste names its rank."""
    merged = parse([
        "[1,6]<stdout>:ip-172-31-12-129:1761:1772 [2] NCCL INFO comm 0x7f0a70329440 rank 6 nranks 8 cudaDev 2 busId "
        "1d0 - Init COMPLETE",
        "[1,3]<stdout>:ip-172-31-0-63:2123:2132 [3] NCCL INFO comm 0x7f30c0328050 rank 3 nranks 8 cudaDev 3 busId "
        "1e0 - Init COMPLETE",
        "[1,5]<stdout>:ip-172-31-12-129:1760:1771 [1] NCCL INFO Channel 01 : 5[1c0] -> 7[1e0] [send] via NET/Socket/0",
    ])
    assert merged.facts["ranks"] == [3, 5, 6] and "rank" not in merged.facts
    assert merged.facts["world_size"] == 8
    one = parse([
        "[1,1]<stdout>:slave1:126624:126758 [1] misc/argcheck.cc:39 NCCL WARN Broadcast : invalid root 0 (root should "
        "be in the 0..-1 range)",
        "[1,1]<stdout>:slave1:126624:126758 [1] NCCL INFO enqueue.cc:1450 -> 4",
    ])
    assert one.facts["rank"] == 1 and "ranks" not in one.facts
    unlabelled = parse(["nvidia2020:27646:27646 [0] NCCL INFO Bootstrap : Using enp1s0f0:10.100.12.111<0>"])
    assert "rank" not in unlabelled.facts and "ranks" not in unlabelled.facts  # the bracket is a device, not a rank


def test_one_process_on_two_gpus_holds_a_rank_per_device():
    """nccl-tests `-g 2` (NVIDIA/nccl-tests#124, NCCL 2.15.5): one pid inits rank 0 on device 0 and rank 1
    on device 1 (no commId before 2.19); each record is its device's rank, the file names no single rank."""
    out = parse((NCCL.parent / "realworld" / "nccl-tests-124.log").read_text().splitlines())
    by_dev = {(e.origin.device, e.origin.rank) for e in out.events if isinstance(e, (CommMember, TopoEdge))}
    assert by_dev == {(0, 0), (1, 1)}
    assert "rank" not in out.facts and out.facts["ranks"] == [0, 1] and out.facts["world_size"] == 2
    warn = next(e for e in out.events if isinstance(e, ErrorEvent) and e.kind == "nccl-warn")
    assert warn.origin.rank == 0  # device 0's WARN


def test_one_process_one_gpu_keeps_its_single_rank():
    lines = ["vm:495:510 [0] NCCL INFO comm 0x1692c970 rank 2 nranks 4 cudaDev 0 busId 1000 - Init COMPLETE",
             "vm:495:510 [0] NCCL INFO comm 0x2692c970 rank 2 nranks 4 cudaDev 0 busId 1000 - Init COMPLETE"]
    out = parse(lines)
    assert out.facts["rank"] == 2 and "ranks" not in out.facts


def test_rank_by_device_is_only_for_the_process_that_holds_the_devices():
    """Host a's one process inits ranks 0 and 1 on devices 0 and 1; a line of another process (host b,
    device 0, whose init the log lacks) is not host a's device 0, so it takes no rank from it."""
    lines = ["a:495:510 [0] NCCL INFO comm 0x1692c970 rank 0 nranks 4 cudaDev 0 busId 1000 - Init COMPLETE",
             "a:495:510 [1] NCCL INFO comm 0x1692c980 rank 1 nranks 4 cudaDev 1 busId 2000 - Init COMPLETE",
             "b:777:790 [0] misc/socket.cc:50 NCCL WARN socket failed"]
    out = parse(lines)
    warn = next(e for e in out.events if isinstance(e, ErrorEvent) and e.kind == "nccl-warn")
    assert warn.origin.host == "b" and warn.origin.rank is None
    own = [e for e in out.events if isinstance(e, CommMember)]
    assert {(e.origin.device, e.origin.rank) for e in own} == {(0, 0), (1, 1)}
