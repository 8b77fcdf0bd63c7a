"""Synthetic NCCL jobs in the real line formats (field notes), for benchmarks and scale tests.

Why synthetic here: the GPU fixtures hold 8 ranks; 16k or 100k ranks exist only as
generated text. Lines follow the measured NCCL 2.28.9 formats exactly, so the real
reader parses them; nothing bypasses parsing.
"""

from __future__ import annotations

from pathlib import Path

from parsers.gather.evidence import Artifact, Evidence, _apply_hints
from parsers.gather.quiet_gc import pause_gc
from parsers.readers import nccl_log

COMM_ID = "0xa7869d7d53387980"


def rank_lines(rank: int, world: int, ops: int, host: str | None = None, pid: int | None = None,
               op_name: str = "AllReduce") -> list[str]:
    """One rank's NCCL log: init, topology, then `ops` collectives (opCount 0..ops-1)."""
    host = host or f"node{rank:05d}"
    pid = pid or 10000 + rank
    ptr = f"0x{0x2be70000 + rank:x}"
    p = f"{host}:{pid}:{pid} [0] NCCL INFO "
    out = [
        f"{p}ncclCommInitRankConfig comm {ptr} rank {rank} nranks {world} cudaDev 0 nvmlDev 0 busId 60 "
        f"commId {COMM_ID} - Init START\n",
        f"{p}comm {ptr} rank {rank} nRanks {world} nNodes {world} localRanks 1 localRank 0 MNNVL 0\n",
        f"{p}Ring 00 : {(rank - 1) % world} -> {rank} -> {(rank + 1) % world}\n",
        f"{p}Tree 0 : {(rank - 1) // 2 if rank else -1} -> {rank} -> {2 * rank + 1 if 2 * rank + 1 < world else -1}/"
        f"{2 * rank + 2 if 2 * rank + 2 < world else -1}/-1\n",
    ]
    for oc in range(ops):
        name = op_name if oc == ops - 1 else "AllReduce"
        out.append(f"{p}{name}: opCount {oc:x} sendbuff 0x7ef8fd800000 recvbuff 0x7ef8fd800000 count 1048576 "
                   f"datatype 7 op 0 root 0 comm {ptr} [nranks={world}] stream (nil)\n")
    return out


def job(world: int, ops: int = 11, culprit: int | None = None, fault: str = "behind") -> Evidence:
    """A hung job: every rank logged `ops` collectives except the culprit (one fewer, or a different op)."""
    arts = Evidence()
    with pause_gc():
        _fill(arts, world, ops, culprit, fault)
    return arts


def _fill(arts: Evidence, world: int, ops: int, culprit: int | None, fault: str) -> None:
    for r in range(world):
        if r == culprit and fault == "behind":
            lines = rank_lines(r, world, ops - 1)
        elif r == culprit and fault == "mismatch":
            lines = rank_lines(r, world, ops, op_name="AllGather")
        else:
            lines = rank_lines(r, world, ops)
        parsed = nccl_log.parse_lines(lines, f"synthetic/rank{r}.log")
        _apply_hints(parsed, {})  # as load_file does: events take the file's rank, host and pid
        arts.artifacts.append(Artifact(Path(f"synthetic/rank{r}.log"), "nccl-log", {}, parsed))


def write_log(path: Path, ranks: int, ops: int) -> int:
    """One big NCCL log file (many ranks' lines), as NCCL_DEBUG_FILE collections concatenate them."""
    n = 0
    with open(path, "w") as fh:
        for r in range(ranks):
            lines = rank_lines(r, ranks, ops)
            fh.writelines(lines)
            n += len(lines)
    return n
