"""The ranks `collect` targets on this host: discovery's findings, with ranks recovered by attaching a tool.

Why here and not in forensics/discover/: discovery reads /proc only. A spawn-launched process's
environment names no rank; its number is recovered by running `py-spy dump --locals` on it, which
attaches to the target, so it runs under collect's tool runner (time limit, own session, killed with
collect) and state guard (a target left stopped is resumed), like every other tool collect runs.
"""

from __future__ import annotations

import json

from forensics.collect.guard import StateGuard
from forensics.collect.tool import run_tool
from forensics.discover import procfs
from forensics.discover.exited import find_exited, recover_exited_ranks
from forensics.discover.ranks import RankProcess, drop_children, host_name, is_rank_env, rank_process
from forensics.discover.spawned import find_spawned, rank_from_pyspy
from parsers.model.states import letter_rule


def discover(pids: list[int] | None = None, host: str | None = None,
             job: str | None = None) -> tuple[list[RankProcess], list[str]]:
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
        spawned = find_spawned(host, exclude=set(found))
        recover_ranks(spawned)
        for proc in spawned:
            if job is None or proc.job_id == job:
                found[proc.pid] = proc
    ranks = drop_children(found)
    if explicit:
        zombies = [p for p in ranks if p.rank is None and procfs.state_or_none(p.pid) == "Z"]
        recover_ranks([p for p in ranks if p.rank is None and p not in zombies])
        recover_exited_ranks(zombies, [p for p in ranks if p not in zombies])
    else:
        ranks += [p for p in find_exited(ranks, host) if job is None or p.job_id == job]
    return ranks, problems


def recover_ranks(procs: list, timeout: float = 10.0) -> None:
    """Set .rank/.rank_source of unranked processes from py-spy --locals (one at a time, state guarded)."""
    for proc in procs:
        if proc.rank is not None:
            continue
        try:
            nonblocking = letter_rule(procfs.read_state(proc.pid)) == "stopped" or bool(procfs.tracer_pid(proc.pid))
        except (procfs.ProcessGone, OSError):
            continue
        argv = ["py-spy", "dump", "--pid", str(proc.pid), "--json",
                "--locals"] + (["--nonblocking"] if nonblocking else [])
        with StateGuard(proc.pid):
            result = run_tool(argv, timeout=timeout)
        if not result.ok:
            proc.job_evidence.append(f"rank not recovered: py-spy --locals failed "
                                     f"({(result.stderr or '').strip()[:120]})")
            continue
        try:
            rank = rank_from_pyspy(json.loads(result.stdout))
        except ValueError:
            rank = None
        if rank is None:
            proc.job_evidence.append("rank not recovered: no spawn wrapper frame with a rank index in py-spy --locals")
            continue
        proc.rank, proc.rank_source = rank, "py-spy-locals"
        proc.job_evidence.append(f"rank {rank} from py-spy --locals (the spawn wrapper's index argument)")
