"""The ranks of distributed jobs on this host, from their environment: the pieces discovery is made of.

torchrun, torch.distributed launchers, Slurm wrappers and most frameworks export
RANK / LOCAL_RANK / WORLD_SIZE (and TORCHELASTIC_* under torchrun) to each worker.
Children of a worker (data loader workers) inherit the same variables, so a process
whose parent is the same rank of the same job is a child, not another rank.
What one environment says is in forensics.discover.rankenv (re-exported here). `discover()`, which walks
/proc with these and attaches py-spy to recover a spawned rank's number, is collect's
(forensics/collect/targets.py): discovery reads /proc only.
"""

from __future__ import annotations

from forensics.discover import procfs
from forensics.discover.rankenv import (MAX_EXPECTED_MISSING, MAX_GROUPS, MAX_LOCAL_WORLD, MAX_WORLD,  # noqa: F401
                                        RANK_KEYS, WORLD_KEYS, ExpectedRank, RankProcess, host_name, is_rank_env,
                                        job_id_of, rank_process)


def drop_children(found: dict[int, RankProcess]) -> list[RankProcess]:
    """Drop processes whose parent is the same rank of the same job (data loader workers)."""
    keep = []
    for proc in found.values():
        parent = procfs.read_ppid(proc.pid)
        twin = found.get(parent) if parent else None
        if twin and twin.rank == proc.rank and twin.job_id == proc.job_id and proc.rank is not None:
            continue
        keep.append(proc)
    return sorted(keep, key=lambda p: (p.job_id or "", p.rank if p.rank is not None else 1 << 30, p.pid))


def expected_missing(ranks: list[RankProcess]) -> list[ExpectedRank]:
    """Ranks the jobs' own numbers place on this host that have no process here.

    Uses GROUP_RANK x LOCAL_WORLD_SIZE + LOCAL_RANK (torchrun's homogeneous layout); on a
    single-host job (WORLD_SIZE == LOCAL_WORLD_SIZE) every rank below WORLD_SIZE is
    expected. Without those numbers nothing is claimed: the rank may live elsewhere.
    """
    missing: list[ExpectedRank] = []
    by_job: dict[str | None, list[RankProcess]] = {}
    for proc in ranks:
        if proc.rank is not None:
            by_job.setdefault(proc.job_id, []).append(proc)
    for job, procs in by_job.items():
        present = {p.rank for p in procs}
        sample = procs[0]
        lws, world, group = sample.local_world_size, sample.world_size, sample.group_rank
        if (lws and lws > MAX_LOCAL_WORLD) or (world and world > MAX_WORLD):
            continue  # numbers no real job has: claim nothing rather than thousands of phantoms
        if lws and group is not None:
            expected = set(range(group * lws, group * lws + lws))
            why = f"LOCAL_WORLD_SIZE={lws} and GROUP_RANK={group} place it on this host"
        elif world and lws == world and world <= MAX_EXPECTED_MISSING:
            expected = set(range(world))
            why = f"WORLD_SIZE=LOCAL_WORLD_SIZE={world}: every rank runs on this host"
        else:
            continue
        for rank in sorted(expected - present):
            missing.append(ExpectedRank(rank=rank, job_id=job, reason=f"no process found; {why}"))
    return missing
