"""Ranks whose environment names no rank: torch.multiprocessing.spawn, Lightning ddp_spawn, notebooks.

Why: such launchers pass the rank as an argument and set RANK with os.environ inside the
process, so /proc/PID/environ (the environment at exec) lacks it (field notes). They are
found as a group instead: Python processes started by multiprocessing's spawn or
forkserver (their command line says so), with torch loaded, children of one launcher;
grouped by that parent and by the store address they inherited (MASTER_ADDR/PORT), if any.
Their rank is then recovered where a source tells it (forensics/collect/targets.py, which attaches the
tool; `rank_from_pyspy` here reads its answer): `py-spy dump --locals` shows the
index torch's `_wrap(fn, i, ...)` (or Lightning's `_wrapping_function(process_idx, ...)`)
was called with. Where nothing tells it, the process stays with rank None, and its pid,
host and parent are in the manifest for the verdict to name it by.
"""

from __future__ import annotations

from forensics.discover import procfs
from forensics.discover.rankenv import RankProcess, job_id_of

SPAWN_MARKS = ("from multiprocessing.spawn import spawn_main", "--multiprocessing-fork")
MAX_CANDIDATES = 1024
#: (function, file suffix, local) that hold the rank index in known spawn wrappers
RANK_LOCALS = (
    ("_wrap", "torch/multiprocessing/spawn.py", "i"),
    ("_wrapping_function", "multiprocessing.py", "process_idx"),
)


def _spawned_cmdline(cmdline: list[str]) -> bool:
    text = " ".join(cmdline[:16])
    return any(mark in text for mark in SPAWN_MARKS)


def _has_torch(pid: int) -> bool:
    """True when libtorch is mapped: a multiprocessing child that imported torch (bounded read)."""
    try:
        with open(procfs.PROC / str(pid) / "maps", "rb") as fh:
            data = fh.read(8 << 20)
    except OSError:
        return False
    return b"libtorch" in data or b"/torch/_C" in data


def find_spawned(host: str, exclude: set[int]) -> list:
    """Spawn-launched torch processes on this host, grouped into jobs, rank None: their rank is recovered by
    forensics.collect.targets.recover_ranks (py-spy --locals, a tool attached: collect's)."""
    cands: dict[int, tuple[dict[str, str], list[str], int | None]] = {}
    for pid in procfs.all_pids():
        if pid in exclude or len(cands) >= MAX_CANDIDATES:
            continue
        cmd = procfs.read_cmdline(pid)
        if not _spawned_cmdline(cmd):
            continue
        try:
            env = procfs.read_environ(pid)
        except (procfs.ProcessGone, PermissionError, OSError):
            continue
        if not _has_torch(pid):
            continue
        cands[pid] = (env, cmd, procfs.read_ppid(pid))
    procs = []
    for pid, (env, cmd, ppid) in sorted(cands.items()):
        if ppid in cands or ppid in exclude:
            continue  # a spawned DataLoader worker of a rank: a child, collected as one
        siblings = sorted(p for p, (_, _, pp) in cands.items() if pp == ppid and pp is not None)
        store = job_id_of(env)
        job = store if store and ":" in store else f"spawn:{host}:ppid{ppid}"
        evidence = [f"started by multiprocessing spawn (command line {' '.join(cmd[:3])[:120]!r})",
                    f"one of {len(siblings)} torch processes spawned by pid {ppid}: {siblings[:16]}"]
        if store:
            evidence.append(f"store address inherited from the launcher: {store}")
        procs.append(RankProcess(pid=pid, host=host, rank=None, local_rank=None, world_size=None,
                                 local_world_size=None, group_rank=None, job_id=job, environ=env, cmdline=cmd,
                                 rank_source=None, ppid=ppid, job_evidence=evidence))
    return procs


def rank_from_pyspy(data: object) -> int | None:
    """The rank index from py-spy --locals JSON: the main thread's spawn-wrapper frame, else a `rank` argument."""
    if not isinstance(data, list):
        return None
    fallback = None
    for thread in data[:256]:
        if not isinstance(thread, dict):
            continue
        for frame in (thread.get("frames") or [])[:512]:
            if not isinstance(frame, dict):
                continue
            name, file = str(frame.get("name")), str(frame.get("filename"))
            locals_ = {str(v.get("name")): v for v in (frame.get("locals") or [])[:256] if isinstance(v, dict)}
            for func, suffix, var in RANK_LOCALS:
                if name == func and file.endswith(suffix) and var in locals_:
                    value = str(locals_[var].get("repr", ""))
                    if value.isdigit():
                        return int(value)
            arg = locals_.get("rank")
            if fallback is None and arg and arg.get("arg") and str(arg.get("repr", "")).isdigit():
                fallback = int(arg["repr"])
    return fallback
