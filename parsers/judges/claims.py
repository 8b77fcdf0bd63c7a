"""Ranks that two processes claim, and ranks that none claims: said with both sources, judged for neither.

Why: a rank's number comes from its process's environment (RANK), and any child inherits that environment
(a launcher's helper, a data loader worker that outlived its parent, a tool started from the rank's shell),
or a script sets it wrong. Two processes then claim one rank, and the rank whose number was taken may
appear to have no process. Neither is a culprit by itself: each claimant is judged on its own evidence,
the conflict is an observation naming both, and a rank that none claims is not called absent while a
surplus claim may be it (parsers/judges/stacks.py).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from parsers.model.findings import ClaimFact
from parsers.model.ranges import missing

if TYPE_CHECKING:  # an annotation: the merge of digests imports this module (through the stacks judge), reading no file
    from parsers.gather.evidence import Evidence

MAX_CLAIMS = 16  #: conflicts said (the rest are counted in the coverage like any rank)
MAX_CLAIMANTS = 8  #: claimants named per rank


def absent_by_job(ev: Evidence) -> dict[Any, tuple[int, list[Any], list[int]]]:
    """job -> (world size, its rank records, ranks below the world size with no process, none collected
    elsewhere, not named missing by the manifest) for each job whose ranks are few enough to list (at most
    one in sixteen absent): counted from the evidence, never allocated per declared rank."""
    named = {m.rank for m in ev.missing}
    jobs: dict[Any, list] = {}
    for r in ev.ranks:
        if r.rank is not None and r.record.world_size:
            jobs.setdefault(r.record.job_id, []).append(r)
    # a process whose job is unknown (a zombie named by pid: its environment is gone) still holds its rank
    unplaced = {r.rank for r in ev.ranks if r.rank is not None and not r.record.job_id and not r.record.world_size}
    out = {}
    for job, ranks in jobs.items():
        world = max(r.record.world_size for r in ranks)
        present = {r.rank for r in ranks} | named | unplaced
        absent = missing(world, [*present, *ev.elsewhere], max(1, world // 16))
        if absent is not None:
            out[job] = (world, ranks, absent)
    return out


def surplus(ranks: list[Any]) -> int:
    """Processes beyond the first that claim a rank already claimed."""
    return len(ranks) - len({r.rank for r in ranks})


def claims(ev: Evidence) -> list[ClaimFact]:
    """Each rank that two or more processes of the evidence claim, with both sources and the unclaimed ranks."""
    by_rank: dict[int, list[tuple[str, int]]] = {}
    for r in ev.ranks:
        if r.rank is not None:
            by_rank.setdefault(r.rank, []).append((str(r.record.host), r.record.pid))
    doubled = sorted((rank, procs) for rank, procs in by_rank.items() if len(procs) > 1)
    if not doubled:
        return []
    unclaimed = sorted({rank for _, _, absent in absent_by_job(ev).values() for rank in absent})
    return [ClaimFact(rank, tuple(procs[:MAX_CLAIMANTS]), tuple(unclaimed[:MAX_CLAIMS]))
            for rank, procs in doubled[:MAX_CLAIMS]]
