"""Judge messages that name another rank: the rank a message names is the suspect, not the rank that printed it.

Why a judge of its own: `monitored_barrier` exists to say who did not arrive. Rank 0 raises
"[Rank 0]: Ranks 1, 6 failed to pass monitoredBarrier in 30000 ms" (gloo runs it for NCCL jobs too);
the ranks that did arrive raise "... received errors while waiting for send/recv from rank 0". Read
for who printed them, these are rank 0's exception and everybody's first error; read for whom they
name, they say that ranks 1 and 6 never came. The reporting rank only waited: its line is the
evidence against the named ranks, and it is no suspect for the absence it reports.
"""

from __future__ import annotations

from typing import Any

from parsers.evidence import Evidence
from parsers.model.events import ErrorEvent, ErrorKind
from parsers.model.findings import Findings, JudgeContext, ReasonClass, Suspect, cite, of_rank
from parsers.ranges import fold

#: ranks one report may name and still point at them: a report naming more names no one in particular
MAX_NAMED = 64


def judge(ev: Evidence, ctx: JudgeContext | None = None) -> Findings:
    """The named-ranks judge (the one protocol): the ranks a monitored barrier names as absent."""
    return Findings("logs", barrier_absent(ev), judge="named")


def _reports(ev: Evidence) -> list[tuple[ErrorEvent, Any]]:
    """Every 'failed to pass monitoredBarrier' line of every log, with its artifact, in file order. Only the
    group's rank 0 waits and reports, and the ranks it names are ranks of that group: a report printed by another
    global rank comes from a subgroup whose ranks are not the job's, and names no one here."""
    return [(e, art) for art in ev.artifacts if art.parsed for e in art.parsed.events
            if type(e) is ErrorEvent and e.kind == ErrorKind.BARRIER_ABSENT and e.origin.rank in (None, 0)]


def barrier_absent(ev: Evidence) -> list[Suspect]:
    """One suspect per rank a monitored barrier names as absent, cited with the reporter's line; the widest
    report wins (with wait_all_ranks=True, rank 0 logs one line per rank and then the whole list)."""
    reports = _reports(ev)
    if not reports:
        return []
    named: dict[int, tuple[ErrorEvent, Any]] = {}
    for e, art in sorted(reports, key=lambda ea: -len(ea[0].data.get("absent") or ())):  # stable: file order next
        for r in e.data.get("absent") or ():
            named.setdefault(int(r), (e, art))
    if not named or len(named) > MAX_NAMED:
        return []
    procs = {r.rank: r for r in ev.ranks if r.rank is not None}
    arrived = sorted({e.origin.rank for art in ev.artifacts if art.parsed for e in art.parsed.events
                      if type(e) is ErrorEvent and e.kind == ErrorKind.BARRIER_WAIT and e.origin.rank is not None}
                     - set(named))
    out = []
    for rank, (e, art) in sorted(named.items()):
        out.append(_suspect(rank, e, art, procs.get(rank), named, arrived))
    return out


def _suspect(rank: int, e: ErrorEvent, art: Any, proc: Any, named: dict, arrived: list[int]) -> Suspect:
    """The suspect for one named rank: the reporter's line first, then who else arrived."""
    by = "rank 0"  # the one rank that waits in a monitored barrier and reports (checked in _reports)
    ms = e.data.get("timeout_ms")
    others = sorted(set(named) - {rank})
    reason = of_rank(rank, f"never reached the monitored barrier: {by} waited {ms} ms for it"
                     + (f" (and for rank{'s' if len(others) > 1 else ''} {fold(others)})" if others else ""))
    evidence = [cite(f"{by} reports ({art.cite}" + (f":{e.origin.line}" if e.origin.line else "") + f"): {e.message[:200]}",
                     tool="c10d", file=art.cite, line=e.origin.line)]
    if arrived:
        many = len(arrived) > 1
        evidence.append(cite(f"rank{'s' if many else ''} {fold(arrived)} reached the barrier and then lost "
                             f"{'their' if many else 'its'} wait for {by}'s answer", tool="c10d"))
    return Suspect(rank=rank, host=proc.record.host if proc else None, pid=proc.record.pid if proc else None,
                   reason_class=ReasonClass.NAMED_ABSENT, reason=reason,
                   confidence=ReasonClass.NAMED_ABSENT.default_confidence, evidence=evidence)
