"""A rank's identity read from its environment: RANK / LOCAL_RANK / WORLD_SIZE and the job id.

torchrun, torch.distributed launchers, Slurm wrappers and most frameworks export these variables to each
worker. Apart from the walk over /proc (forensics.collect.targets.discover) so that the modules that find
ranks another way (exited.py: zombies; spawned.py: spawn children) build the same RankProcess without
importing the walker that calls them (no import circle).
"""

from __future__ import annotations

import socket
from dataclasses import dataclass, field

from forensics.discover import procfs
from parsers.input.ints import as_int

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
    #: recorder state files found for it where its environment cannot say (an exited rank's copy at its end, in
    #: the folder its siblings name: forensics.discover.exited)
    recorder_files: list = field(default_factory=list)


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
        number = as_int(value.strip(), text=True, low=0, high=limit) if value.strip().isdigit() else None  # no sign
        if number is not None:
            return number
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
