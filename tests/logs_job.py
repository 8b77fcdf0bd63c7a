"""A logs-only post-mortem of a hung N-rank job (512 by default), written as the job would leave it.

(A module of tests/, like hf_testpaths: unit and integration tests import it by name.)

Why generated: no machine here runs 512 GPUs. Every line is in a format captured for real in
tests/fixtures/nccl/sleep (torch 2.11, NCCL 2.28.9, 8 ranks, rank 5 sleeps before collective 11):
each rank's NCCL_DEBUG=INFO log (version, init START/COMPLETE, its comm line, AllReduce op lines)
and its stderr (the c10d watchdog timeout and 'failure detected' lines of the ranks that wait; the
dump-signal line of the rank that sleeps, whose last enqueued work is one behind). The lines are
the capture's, with the rank, host, pid, device and world size of a 512-rank job of 64 hosts x 8 GPUs.
"""

from __future__ import annotations

from pathlib import Path

COMM_ID = "0xde6c834580d4135f"  #: the capture's commId
OPS = 11  #: SeqNum of the collective the waiters time out in (opCount 0..OPS-1 logged by them)


def host_of(rank: int) -> str:
    return f"node{rank // 8:03d}"


def write_job(root: Path, world: int = 512, culprit: int = 347) -> Path:
    """The folder of `world` ranks' logs under root/<host>/; rank `culprit` stopped one collective early."""
    for rank in range(world):
        host, pid, dev = host_of(rank), 20000 + rank, rank % 8
        folder = root / host
        folder.mkdir(parents=True, exist_ok=True)
        p = f"{host}:{pid}:{pid} [{dev}] NCCL INFO "
        ptr = f"0x{0x1b720480 + 0x1000 * rank:x}"
        lines = [f"{p}NCCL version 2.28.9+cuda13.0",
                 f"{p}ncclCommInitRankConfig comm {ptr} rank {rank} nranks {world} cudaDev {dev} "
                 f"nvmlDev {dev} busId 60 "
                 f"commId {COMM_ID} - Init START",
                 f"{p}comm {ptr} rank {rank} nRanks {world} nNodes {world // 8} localRanks 8 localRank {dev} MNNVL 0",
                 f"{p}ncclCommInitRankConfig comm {ptr} rank {rank} nranks {world} cudaDev {dev} "
                 f"nvmlDev {dev} busId 60 "
                 f"commId {COMM_ID} - Init COMPLETE"]
        last = OPS - 2 if rank == culprit else OPS - 1
        lines += [f"{p}AllReduce: opCount {oc:x} sendbuff 0x7fc751800000 recvbuff 0x7fc751800000 count "
                  f"1048576 datatype 7 "
                  f"op 0 root 0 comm {ptr} [nranks={world}] stream (nil)" for oc in range(last + 1)]
        (folder / f"nccl.{host}.{pid}.log").write_text("\n".join(lines) + "\n")
        tag = f"[rank{rank}]:[E1129 09:26:54.447934717 "
        pg = f"[PG ID 0 PG GUID 0(default_pg) Rank {rank}]"
        if rank == culprit:
            err = [f"{tag}ProcessGroupNCCL.cpp:1914] {pg} Received a dump signal due to a collective "
                   f"timeout from  rank 3 "
                   f"and we will try our best to dump the debug info. Last enqueued NCCL work: "
                   f"{OPS - 1}, last completed "
                   f"NCCL work: {OPS - 1}."]
        else:
            err = [f"{tag}ProcessGroupNCCL.cpp:689] [Rank {rank}] Watchdog caught collective operation timeout: "
                   f"WorkNCCL(SeqNum={OPS}, OpType=ALLREDUCE, NumelIn=1048576, NumelOut=1048576, "
                   f"Timeout(ms)=30000) ran "
                   "for 30079 milliseconds before timing out.",
                   f"{tag}ProcessGroupNCCL.cpp:2303] {pg}  failure detected by watchdog at work sequence id: {OPS} "
                   f"PG status: last enqueued work: {OPS}, last completed work: {OPS - 1}"]
        (folder / f"rank{rank}.stderr").write_text("\n".join(err) + "\n")
    return root
