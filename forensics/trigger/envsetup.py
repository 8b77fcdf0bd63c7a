"""The environment that makes a later post-mortem possible, set before NCCL and the process group start.

Each entry says why. `forensics env` prints them; `forensics.arm()` sets those the user
has not set. NCCL reads its variables when it initialises and PyTorch its TORCH_*
variables when the process group is created, so arm() must run before
init_process_group to have effect.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class EnvVar:
    name: str
    value: str
    why: str
    aliases: tuple[str, ...] = ()  #: older names of the same setting; if any is set, the user decided


def recommended_env(log_dir: Path | str) -> list[EnvVar]:
    """The recommended variables, with per-rank files under `log_dir`."""
    d = str(log_dir).rstrip("/")
    return [
        EnvVar("NCCL_DEBUG", "INFO", "NCCL logs init, topology and network errors (the rank/host map of the job)"),
        EnvVar("NCCL_DEBUG_SUBSYS", "INIT,NET,RAS",
               "keep the log small; add COLL to log every collective's opCount (costly at scale)"),
        EnvVar("NCCL_DEBUG_FILE", f"{d}/nccl.%h.%p.log",
               "one NCCL log per process (%h host, %p pid) instead of interleaved stderr"),
        EnvVar("TORCH_FR_BUFFER_SIZE", "2000",
               "Flight Recorder: the last 2000 collectives of every rank, kept in memory",
               ("TORCH_NCCL_TRACE_BUFFER_SIZE",)),
        EnvVar("TORCH_NCCL_ENABLE_TIMING", "1",
               "Flight Recorder: a start event per collective, so a dump tells 'started' (on the GPU) from 'scheduled' "
               "(queued behind other work)", ("NCCL_ENABLE_TIMING",)),
        EnvVar("TORCH_NCCL_DUMP_ON_TIMEOUT", "1", "write the Flight Recorder of every rank when the watchdog fires"),
        EnvVar("TORCH_FR_DUMP_TEMP_FILE", f"{d}/fr_trace_rank_", "where those dumps go (one file per rank)",
               ("TORCH_NCCL_DEBUG_INFO_TEMP_FILE",)),
        EnvVar("FORENSICS_RECORDER_COPY_DIR", d,
               "the recorder (if loaded) copies its state here when the job dies (watchdog abort, SIGABRT, exit): a "
               "logs folder then holds what /dev/shm held"),
        EnvVar("NCCL_PROXY_DUMP_SIGNAL", "10",
               "SIGUSR1 makes NCCL print its in-flight network ops to stdout (skip if the job uses SIGUSR1)"),
        EnvVar("NCCL_RAS_ENABLE", "1", "NCCL RAS (2.24+): ask a live job which rank lags (default on; keep it on)"),
        EnvVar("PYTHONFAULTHANDLER", "1",
               "Python stacks of all threads when the watchdog aborts the process (SIGABRT)"),
    ]


def is_set(var: EnvVar, env: dict[str, str] | os._Environ) -> bool:
    return var.name in env or any(a in env for a in var.aliases)


def apply_env(log_dir: Path | str, env: dict[str, str] | os._Environ = os.environ) -> list[str]:
    """Set every recommended variable the user has not set (nor an older alias); returns the names set."""
    Path(log_dir).mkdir(parents=True, exist_ok=True)
    applied = []
    for var in recommended_env(log_dir):
        if not is_set(var, env):
            env[var.name] = var.value
            applied.append(var.name)
    return applied
