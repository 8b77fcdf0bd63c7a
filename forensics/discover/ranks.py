"""Finds the ranks of distributed jobs on this host from their environment.

torchrun, torch.distributed launchers, Slurm wrappers and most frameworks export
RANK / LOCAL_RANK / WORLD_SIZE (and TORCHELASTIC_* under torchrun) to each worker.
Children of a worker (data loader workers) inherit the same variables, so a process
whose parent is the same rank of the same job is a child, not another rank.
"""

from __future__ import annotations

import socket
from dataclasses import dataclass, field

from forensics.discover import procfs

RANK_KEYS = ("RANK", "OMPI_COMM_WORLD_RANK", "PMI_RANK")
WORLD_KEYS = ("WORLD_SIZE", "OMPI_COMM_WORLD_SIZE", "PMI_SIZE")

#: bounds on numbers read from a process's environment (any user can set them):
#: the largest jobs run about 10^5 ranks; no host runs more than a few thousand.
MAX_WORLD = 1 << 22
MAX_LOCAL_WORLD = 4096
MAX_GROUPS = MAX_WORLD
#: ranks one job may be said to miss on one host (each becomes a manifest entry)
MAX_EXPECTED_MISSING = MAX_LOCAL_WORLD


@dataclass
class RankProcess:
    """A process that is one rank of a job, as found on this host."""

    pid: int
    host: str
    rank: int | None
    local_rank: int | None
    world_size: int | None
    local_world_size: int | None
    group_rank: int | None
    job_id: str | None
    environ: dict[str, str] = field(default_factory=dict)
    cmdline: list[str] = field(default_factory=list)
    rank_source: str | None = None  #: environ, py-spy-locals, ... (see forensics.discover.spawned)
    #: output files found for it where /proc cannot say (an exited rank: forensics.discover.exited)
    outputs: list = field(default_factory=list)
    ppid: int | None = None
    job_evidence: list[str] = field(default_factory=list)


@dataclass
class ExpectedRank:
    """A rank that should live on this host by the job's own numbers, but has no process."""

    rank: int
    job_id: str | None
    reason: str


def host_name() -> str:
    """Short host name, cut at the first dot as NCCL prints it."""
    return socket.gethostname().split(".", 1)[0]


def _int(env: dict[str, str], *keys: str, limit: int = MAX_WORLD) -> int | None:
    """The first of `keys` that holds a number in [0, limit); anything else counts as absent.

    The bound matters: LOCAL_WORLD_SIZE=3000000000 in any process's environment once
    made collection build a 3-billion-element set and die without a manifest.
    """
    for key in keys:
        value = env.get(key)
        if value is None:
            continue
        value = value.strip()
        if value.isascii() and value.isdigit() and len(value) <= 12 and int(value) < limit:
            return int(value)
    return None


def job_id_of(env: dict[str, str]) -> str | None:
    """Identity of the job a rank belongs to: torchelastic run id, else rendezvous address."""
    if env.get("TORCHELASTIC_RUN_ID"):
        return env["TORCHELASTIC_RUN_ID"]
    if env.get("SLURM_JOB_ID"):
        return f"slurm-{env['SLURM_JOB_ID']}"
    if env.get("MASTER_ADDR") or env.get("MASTER_PORT"):
        return f"{env.get('MASTER_ADDR', '?')}:{env.get('MASTER_PORT', '?')}"
    return None


def is_rank_env(env: dict[str, str]) -> bool:
    """True when the environment marks a distributed worker (has a rank and a world size)."""
    return _int(env, *RANK_KEYS) is not None and _int(env, *WORLD_KEYS) is not None


def rank_process(pid: int, env: dict[str, str], host: str) -> RankProcess:
    rank = _int(env, *RANK_KEYS)
    return RankProcess(
        pid=pid,
        host=host,
        rank=rank,
        rank_source="environ" if rank is not None else None,
        ppid=procfs.read_ppid(pid),
        local_rank=_int(env, "LOCAL_RANK", "OMPI_COMM_WORLD_LOCAL_RANK", "SLURM_LOCALID"),
        world_size=_int(env, *WORLD_KEYS, limit=MAX_WORLD + 1),
        local_world_size=_int(env, "LOCAL_WORLD_SIZE", "OMPI_COMM_WORLD_LOCAL_SIZE", limit=MAX_LOCAL_WORLD + 1),
        group_rank=_int(env, "GROUP_RANK", "SLURM_NODEID", limit=MAX_GROUPS),
        job_id=job_id_of(env),
        environ=env,
        cmdline=procfs.read_cmdline(pid),
    )


def discover(pids: list[int] | None = None, host: str | None = None, job: str | None = None) -> tuple[list[RankProcess], list[str]]:
    """Ranks on this host: the given pids, or every process whose environment marks a rank.

    Returns (ranks, problems): problems are human lines about pids that could not be read.
    Explicit pids are kept even without rank variables (the user asked for them).
    `job` keeps only ranks of that job id (see job_id_of), for hosts that run several jobs.
    """
    host = host or host_name()
    explicit = pids is not None
    found: dict[int, RankProcess] = {}
    problems: list[str] = []
    for pid in pids if explicit else procfs.all_pids():
        try:
            env = procfs.read_environ(pid)
        except procfs.ProcessGone:
            if explicit and procfs.state_or_none(pid) == "Z":  # exited, not reaped: no environment left
                found[pid] = RankProcess(pid, host, None, None, None, None, None, None, ppid=procfs.read_ppid(pid))
                problems.append(f"pid {pid}: has exited and is a zombie (no environment left)")
            elif explicit:
                problems.append(f"pid {pid}: no such process")
            continue
        except PermissionError:
            if explicit:
                problems.append(f"pid {pid}: environment not readable (permission denied)")
                found[pid] = RankProcess(pid, host, None, None, None, None, None, None)
            continue
        if explicit or is_rank_env(env):
            proc = rank_process(pid, env, host)
            if job is None or proc.job_id == job:
                found[pid] = proc
    if not explicit:
        from forensics.discover.spawned import find_spawned

        for proc in find_spawned(host, exclude=set(found)):
            if job is None or proc.job_id == job:
                found[proc.pid] = proc
    ranks = _drop_children(found)
    from forensics.discover.exited import find_exited, recover_exited_ranks

    if explicit:
        from forensics.discover.spawned import recover_ranks

        zombies = [p for p in ranks if p.rank is None and procfs.state_or_none(p.pid) == "Z"]
        recover_ranks([p for p in ranks if p.rank is None and p not in zombies])
        recover_exited_ranks(zombies, [p for p in ranks if p not in zombies])
    else:
        ranks += [p for p in find_exited(ranks, host) if job is None or p.job_id == job]
    return ranks, problems


def _drop_children(found: dict[int, RankProcess]) -> list[RankProcess]:
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
