"""Judge messages that name another rank: the rank a message names is the suspect, not the rank that printed it.

Why a judge of its own: `monitored_barrier` exists to say who did not arrive. Rank 0 raises
"[Rank 0]: Ranks 1, 6 failed to pass monitoredBarrier in 30000 ms" (gloo runs it for NCCL jobs too);
the ranks that did arrive raise "... received errors while waiting for send/recv from rank 0". Read
for who printed them, these are rank 0's exception and everybody's first error; read for whom they
name, they say that ranks 1 and 6 never came. The reporting rank only waited: its line is the
evidence against the named ranks, and it is no suspect for the absence it reports.

The same holds for a peer named by address (gloo's 'Connection closed by peer [10.1.2.3]:6541', NCCL's 'Connection
closed by remote peer node2<42830>' and its size mismatches, 'peer 10.1.2.3<45678> message truncated'): the
address is mapped to a rank or host as far as the files pair them (parsers/judges/peer_address.py); a lost
connection whose address leaves one rank names that rank; every such report is said as a typed `PeerFact`, mapped
or not, so a reporter is never read as the subject of its own report.
"""

from __future__ import annotations

from typing import Any, cast

from parsers.gather.evidence import Evidence
from parsers.judges import peer_address
from parsers.judges.logs import identity
from parsers.model.events import ErrorEvent, ErrorKind, StatedTimeout, Truncated
from parsers.model.findings import Findings, JudgeContext, PeerFact, ReasonClass, Suspect, cite, of_rank
from parsers.model.ranges import fold

#: ranks one report may name and still point at them: a report naming more names no one in particular
MAX_NAMED = 64


def judge(ev: Evidence, ctx: JudgeContext | None = None) -> Findings:
    """The named-ranks judge (the one protocol): the ranks a monitored barrier names as absent, and the peers lost
    connections name by address (`peers`: every such report as a PeerFact, for the observations)."""
    facts = peer_facts(ev)
    absent = barrier_absent(ev)
    named = {s.rank for s in absent}
    return Findings("logs", absent + [s for s in peer_suspects(ev, facts) if s.rank not in named], judge="named",
                    peers=tuple(facts))


def _reports(ev: Evidence) -> list[tuple[ErrorEvent, Any]]:
    """Every 'failed to pass monitoredBarrier' line of every log, with its artifact, in file order. Only the
    group's rank 0 waits and reports, and the ranks it names are ranks of that group: a report printed by another
    global rank comes from a subgroup whose ranks are not the job's, and names no one here."""
    return [(e, art) for art in ev.artifacts if art.parsed for e in art.parsed.events
            if type(e) is ErrorEvent and e.kind == ErrorKind.BARRIER_ABSENT and e.origin.rank in (None, 0)]


def _absent(e: ErrorEvent) -> list[int]:
    """The ranks a barrier-absent event names (its data, typed by the model)."""
    return cast(StatedTimeout, e.data).absent or []


def barrier_absent(ev: Evidence) -> list[Suspect]:
    """One suspect per rank a monitored barrier names as absent, cited with the reporter's line; the widest
    report wins (with wait_all_ranks=True, rank 0 logs one line per rank and then the whole list)."""
    reports = _reports(ev)
    if not reports:
        return []
    named: dict[int, tuple[ErrorEvent, Any]] = {}
    for e, art in sorted(reports, key=lambda ea: -len(_absent(ea[0]))):  # stable: file order next
        for r in _absent(e):
            named.setdefault(r, (e, art))
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
    ms = cast(StatedTimeout, e.data).timeout_ms
    others = sorted(set(named) - {rank})
    reason = of_rank(rank, f"never reached the monitored barrier: {by} waited {ms} ms for it"
                     + (f" (and for rank{'s' if len(others) > 1 else ''} {fold(others)})" if others else ""))
    evidence: list[str] = [cite(f"{by} reports ({art.cite}" + (f":{e.origin.line}" if e.origin.line else "")
                                + f"): {e.message[:200]}", tool="c10d", file=art.cite, line=e.origin.line)]
    if arrived:
        many = len(arrived) > 1
        evidence.append(cite(f"rank{'s' if many else ''} {fold(arrived)} reached the barrier and then lost "
                             f"{'their' if many else 'its'} wait for {by}'s answer", tool="c10d"))
    return Suspect(rank=rank, host=proc.record.host if proc else None, pid=proc.record.pid if proc else None,
                   reason_class=ReasonClass.NAMED_ABSENT, reason=reason,
                   confidence=ReasonClass.NAMED_ABSENT.default_confidence, evidence=evidence)


#: report kinds -> PeerFact.what
_WHAT = {ErrorKind.CONNECTION_CLOSED: "closed", ErrorKind.CONNECTION_RESET: "reset", ErrorKind.SIZE_MISMATCH: "size"}
#: most facts said (one per address and kind: a job of many hosts losing one names one address)
MAX_PEER_FACTS = 16


def peer_facts(ev: Evidence) -> list[PeerFact]:
    """One PeerFact per (kind of report, address, sizes): its reporters, and whom the files pair the address with."""
    if not peer_address.any_report(ev):
        return []
    ids = identity.build(ev)
    reports = peer_address.reports(ev, ids)
    if not reports:
        return []
    addresses, linked, seen = peer_address.book(ev, ids), peer_address.links(ev, ids), peer_address.hosts(ev, reports)
    groups: dict[tuple, tuple[list, list, peer_address.Named, ErrorEvent, str]] = {}
    for rep in reports:
        named = peer_address.resolve(rep, ids, addresses, linked, seen)
        sizes = rep.event.data if type(rep.event.data) is Truncated else Truncated()  # closed, reset: no sizes
        key = (_WHAT[rep.event.kind], rep.addr, named.ranks, named.how, sizes.sent, sizes.posted, sizes.side)
        reporters, procs, *_ = groups.setdefault(key, ([], [], named, rep.event, rep.file))
        if rep.reporter is not None and rep.reporter not in reporters:
            reporters.append(rep.reporter)
        elif rep.reporter is None and rep.event.origin.pid is not None:
            p = (rep.event.origin.host, rep.event.origin.pid)
            if p not in procs:
                procs.append(p)
    out = []
    for key, (reporters, procs, named, e, file) in list(groups.items())[:MAX_PEER_FACTS]:
        what, addr, ranks, how, sent, posted, side = key
        line = f"{file}" + (f":{e.origin.line}" if e.origin.line else "") + f": {e.message[:200]}"
        out.append(PeerFact(what, tuple(sorted(reporters)), addr, ranks, named.host, how, sent, posted, side,
                            cite(line, tool=e.source or "logs", file=file, line=e.origin.line), named.said,
                            tuple(procs[:4])))
    return out


def peer_suspects(ev: Evidence, facts: list[PeerFact]) -> list[Suspect]:
    """The rank a lost connection names, where the files leave one: cited with the reports and the line that pairs
    the address with it. A size mismatch names a pair, not a culprit: it is said, never a suspect here."""
    procs = {r.rank: r for r in ev.ranks if r.rank is not None}
    # a named rank that lost a connection itself may have gone because of it (gloo ends a rank on its first lost
    # peer, and its own peers then lose it): only a rank that reports no loss of its own is named
    lost = {r for f in facts if f.what in ("closed", "reset") for r in f.reporters}
    by_rank: dict[int, list[PeerFact]] = {}
    for f in facts:
        if f.what in ("closed", "reset") and f.mapped is not None and f.mapped not in lost:
            by_rank.setdefault(f.mapped, []).append(f)
    out = []
    for rank, found in sorted(by_rank.items()):
        reporters = sorted({r for f in found for r in f.reporters})
        proc = procs.get(rank)
        host_only = all(f.how.startswith("host") for f in found)
        how = "the host of that name holds it" if host_only else "its own NCCL log states that address"
        who = f"rank{'s' if len(reporters) > 1 else ''} {fold(reporters)}" if reporters else "a rank"
        evidence: list[str] = []
        evidence += [f.citation for f in found if f.citation][:3] + [f.paired for f in found[:1] if f.paired]
        rc = ReasonClass.NAMED_PEER
        out.append(Suspect(rank=rank, host=proc.record.host if proc else found[0].host,
                           pid=proc.record.pid if proc else None,
                           reason_class=rc, reason=of_rank(rank, f"is the peer {who} lost: {found[0].addr} ({how})"),
                           confidence=rc.default_confidence - (0.1 if host_only else 0.0), evidence=evidence))
    return out
