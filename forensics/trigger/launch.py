"""Builds and starts the job-wide collection the leader asks for.

The collector runs as its own process in its own session, so it keeps going when the
watchdog (or the launcher) kills the job a moment later. Which collection:
  all ranks on this host          forensics collect --pid <every rank's pid>
  a Slurm job over several nodes  forensics collect --slurm-job $SLURM_JOB_ID
  several hosts otherwise         forensics collect --hosts <hosts> --match-env <job id var>=<value>
plus any extra arguments the user gave (ssh options, --remote-python, ...).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

from forensics.fleet.hosts import fold


def collection_argv(out: Path, members: dict[int, tuple[str, int]], my_host: str, env: dict[str, str],
                    extra: list[str]) -> list[str]:
    """argv of `forensics collect` for the whole job, given where each rank lives."""
    argv = [sys.executable, "-m", "forensics", "collect", "-o", str(out), "--json", "-q"]
    hosts = sorted({host for host, _ in members.values()} | {my_host})
    if hosts == [my_host]:
        pids = sorted({pid for _, pid in members.values()})
        argv += ["--pid", ",".join(str(p) for p in pids)] if pids else []
    elif env.get("SLURM_JOB_ID"):
        argv += ["--slurm-job", env["SLURM_JOB_ID"]]
    else:
        argv += ["--hosts", fold(hosts)]
        for key in ("TORCHELASTIC_RUN_ID", "MASTER_PORT"):
            if env.get(key):
                argv += ["--match-env", f"{key}={env[key]}"]
                break
    return argv + list(extra)


def start_collection(argv: list[str], out: Path) -> subprocess.Popen:
    """Start the collector detached (own session, no stdin); its JSON summary goes to OUT.json."""
    out.parent.mkdir(parents=True, exist_ok=True)
    summary = open(out.with_name(out.name + ".json"), "wb")
    log = open(out.with_name(out.name + ".log"), "wb")
    env = dict(os.environ)
    here = str(Path(__file__).resolve().parents[2])
    env["PYTHONPATH"] = here + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    for key in ("RANK", "LOCAL_RANK", "WORLD_SIZE", "LOCAL_WORLD_SIZE", "GROUP_RANK"):
        env.pop(key, None)  # the collector is not a rank: never let discovery mistake it for one
    try:
        return subprocess.Popen(argv, stdout=summary, stderr=log, stdin=subprocess.DEVNULL, env=env,
                                start_new_session=True, close_fds=True)
    finally:
        summary.close()
        log.close()


def write_incident(path: Path, record: dict) -> None:
    """The trigger's own record of what happened (read by humans and by tests)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(dict(record, written=time.time()), indent=1) + "\n")
    os.replace(tmp, path)
