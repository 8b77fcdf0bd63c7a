"""Reads the process_state collector's proc.json, and a process's identity from its environment."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from parsers.input import bounded_json
from parsers.model.events import MAX_RANKS, ProcessState
from parsers.input.errors import FileFormatError
from parsers.input.ints import as_int

#: a rank number larger than this is not a rank (hostile or broken input)
MAX_RANK = MAX_RANKS  #: a WORLD_SIZE or RANK larger than this is no claim (parsers.model.events)


def parse_proc_data(data: Any) -> ProcessState:
    """proc.json as a ProcessState; ValueError when it is not one."""
    if not isinstance(data, dict) or "state" not in data or as_int(data.get("pid")) is None:
        raise FileFormatError("not a process_state file (needs 'pid' and 'state')")
    threads = [t for t in (data.get("threads") if isinstance(data.get("threads"), list) else []) if isinstance(t, dict)]
    return ProcessState(
        pid=int(data["pid"]),
        state=str(data["state"])[:2],
        comm=_str(data.get("comm")),
        ppid=as_int(data.get("ppid")),
        uid=as_int(data.get("uid")),
        wchan=_str(data.get("wchan")),
        tracer_pid=as_int(data.get("tracer_pid")),
        vm_rss_kb=as_int(data.get("vm_rss_kb")),
        threads=tuple((as_int(t.get("tid")), _str(t.get("name")), _str(t.get("state")),
                       _str(t.get("wchan"))) for t in threads),
        raw=data,
        exit_status=as_int(data.get("exit_status")),
    )


def read_proc_json(path: Path) -> ProcessState:
    return parse_proc_data(bounded_json.loads(Path(path).read_text(errors="replace")))


def identity_from_environ(env: dict[str, Any]) -> dict[str, Any]:
    """rank, world_size, local_rank and job_id (the store address) from launcher variables.

    Why only these: they are what torchrun, Slurm and MPI launchers set at exec; a value
    that is not a small non-negative integer is ignored, never trusted.
    """
    out: dict[str, Any] = {}
    for key, names in (("rank", ("RANK", "SLURM_PROCID", "OMPI_COMM_WORLD_RANK", "PMI_RANK")),
                       ("world_size", ("WORLD_SIZE", "SLURM_NTASKS", "OMPI_COMM_WORLD_SIZE", "PMI_SIZE")),
                       ("local_rank", ("LOCAL_RANK", "SLURM_LOCALID", "OMPI_COMM_WORLD_LOCAL_RANK")),
                       ("local_world_size",
                        ("LOCAL_WORLD_SIZE", "OMPI_COMM_WORLD_LOCAL_SIZE", "SLURM_NTASKS_PER_NODE"))):
        for name in names:
            value = _small(env.get(name))
            if value is not None:
                out[key] = value
                break
    for key in ("world_size", "local_world_size"):
        if out.get(key) == 0:
            del out[key]
    addr, port = env.get("MASTER_ADDR"), env.get("MASTER_PORT")
    if isinstance(addr, str) and isinstance(port, str) and len(addr) < 256 and port.isdigit():
        out["job_id"] = f"{addr}:{port}"
    visible = env.get("CUDA_VISIBLE_DEVICES")
    if isinstance(visible, str) and len(visible) < 4096:
        out["cuda_visible_devices"] = visible
    host = env.get("NCCL_HOSTID") or env.get("HOSTNAME")
    if isinstance(host, str) and 0 < len(host) < 256:
        out["env_host"] = host
    return out


def _small(value: Any) -> int | None:
    """A rank-sized number from the environment (digits only: no sign, no blanks), else None."""
    return as_int(value, text=True, low=0, high=MAX_RANK + 1) if isinstance(value, str) and value.isdigit() else None


def _str(value: Any) -> str | None:
    return value[:256] if isinstance(value, str) else None
