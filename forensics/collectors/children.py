"""Children of a rank (DataLoader workers and whatever else it started): state, wait channel, stacks.

Why: a rank blocked in DataLoader `Queue.get` is waiting for a worker process; only the
worker's own state and stack ("sleeps in ShardDataset.__getitem__") say why. Children
inherit RANK, so discovery drops them as ranks; they are collected here, each into
`<rank dir>/children/pid<P>/` (proc.json, pyspy.json), and linked to the rank in the
manifest (RankRecord.children). Runs after the rank's own ptrace tools, one child at a
time, so two tracers never meet on one pid.
"""

from __future__ import annotations

import json

from forensics import safefs
from parsers.model.manifest import ChildRecord, CollectorRecord, Status
from parsers.gather.registry import collector_file
from forensics.collectors.base import CollectOptions, RankTarget, timed
from forensics.collectors.pyspy import PySpyCollector
from forensics.discover import procfs
from forensics.bundle.redact import redact_argv

MAX_CHILDREN = 16  #: per rank (a DataLoader has num_workers of them)
MAX_DEPTH = 2  #: children and grandchildren (a worker's own helper)


def find_children(pid: int) -> list[tuple[int, int, int]]:
    """(child pid, parent pid, depth) below `pid`, breadth first, bounded."""
    found: list[tuple[int, int, int]] = []
    level = [pid]
    for depth in range(1, MAX_DEPTH + 1):
        nxt = []
        for parent in level:
            for kid in procfs.children_of(parent, MAX_CHILDREN):
                if len(found) >= MAX_CHILDREN:
                    return found
                found.append((kid, parent, depth))
                nxt.append(kid)
        level = nxt
    return found


def collect_children(target: RankTarget, options: CollectOptions) -> list[ChildRecord]:
    """Collect every child of the rank; a child that vanishes meanwhile is recorded as gone."""
    records = []
    rank_value = target.environ.get("RANK")
    for pid, ppid, depth in find_children(target.pid):
        rel = f"{target.rel_dir}/children/pid{pid}"
        rec = ChildRecord(pid=pid, ppid=ppid, dir=rel, depth=depth, cmdline=redact_argv(procfs.read_cmdline(pid)[:64]))
        child = RankTarget(pid=pid, host=target.host, rank=target.rank, environ={}, bundle_root=target.bundle_root,
                           rel_dir=rel, budget=target.budget)  # a child's files are its rank's: the same caps
        safefs.make_dirs(target.bundle_root, rel)
        rec.collectors.append(timed("process_state", lambda: _proc(child, rec)))
        try:
            env = procfs.read_environ(pid)
            rec.inherits_rank = rank_value is not None and env.get("RANK") == rank_value
        except (procfs.ProcessGone, PermissionError, OSError):
            pass
        if rec.state != "Z" and rec.state is not None:
            rec.collectors.append(timed("py-spy", lambda: PySpyCollector().collect(child, options)))
        records.append(rec)
    return records


def _proc(child: RankTarget, rec: ChildRecord) -> CollectorRecord:
    try:
        state = procfs.read_proc_state(child.pid)
    except procfs.ProcessGone:
        return CollectorRecord("process_state", Status.GONE, error=f"pid {child.pid} no longer exists")
    rec.comm, rec.state, rec.wchan = state.comm, state.state, state.wchan
    path, rel = child.out(collector_file("process_state", "process-state"))
    text = json.dumps(state.to_dict(), indent=1) + "\n"
    child.budget.settle(child.budget.reserve(len(text)), len(text))  # always written, as the rank's own, and counted
    safefs.write_new(path, text)
    return CollectorRecord("process_state", Status.OK, files=[rel], details={"state": state.state})
