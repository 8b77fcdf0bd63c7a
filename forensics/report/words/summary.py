"""The words of a verdict: a summary of at most two sentences, and the lines under it.

Built from typed results only (the arbiter's suspects, their explanation links, the deadlock, the
hang decision, the observations judges.observations returned), never by re-reading events. The
lines: leads (suspects below the naming bar), stragglers, consequences (what the culprit explains),
and what the evidence shows, each its own line in every verdict shape, 'no culprit' included.
Presentation's: parsers/ returns the verdict typed with these fields empty, and
forensics.report.words.worded fills them (the one producer of a verdict's words).
"""

from __future__ import annotations

from typing import AbstractSet, Any

from forensics.report.words.facts import evidence_gap, observed
from parsers.judges.logs import names
from parsers.judges.stacks import words_of_waits
from parsers.model.findings import Deadlock, Demotion, ObservationKind, Suspect, Verdict, WaitEdge
from parsers.model.ranges import fold

#: observations said in the summary itself when no culprit is named (the rest are lines under it)
IN_SUMMARY = 1


def said(s: Suspect) -> str:
    """A suspect's reason without a leading 'rank N' that would repeat its label (dropped only where the judge
    typed the reason as naming this rank first: `Suspect.names_own_rank`, never by reading the words)."""
    return s.reason.predicate if s.names_own_rank else s.reason


def where(edge: WaitEdge) -> str:
    """A typed wait edge's scope and op in words: 'recv (p2p seq 3) of the default group', 'AllReduce seq 11
    of communicator 0x..', or the group alone where the edge names no op (the logs judge's positions)."""
    group = names.group(edge.comm_id) if edge.comm_id else "a group"
    if edge.point_to_point:  # a stack's call carries no p2p sequence number
        seq = f" (p2p seq {edge.p2p_seq})" if edge.p2p_seq is not None else ""
        return f"{edge.op}{seq} of {group}"
    if edge.op or edge.source == "recorder":
        return f"{edge.op or 'an op'} of {group}"
    return group


def demoted(d: Demotion) -> str:
    """Why a root claim lost weight, in words, from its typed fields."""
    if d.unproven:
        return ("hang not established: one snapshot (where each log stops, one look at the processes) is one moment "
                "of a job that may still run")
    if d.cycle:
        return (f"the verdict is the deadlock of ranks {fold(d.cycle)}, which wait on no rank outside it: a claim "
                "about another rank is a lead beside it, not its culprit")
    if d.waits_on is not None:
        scope = where(d.edge) if d.edge is not None else "another communicator"
        return f"it waits itself (on rank {d.waits_on} in {scope}), so it is not where the wait ends"
    return f"it waits itself (its main thread is blocked: {d.blocked}), so it is not where the wait ends"


def deadlock(d: Deadlock) -> str:
    """'deadlock: ranks 0, 1, 2 wait on each other in a cycle (0 on 1 in <where>, ...): <why, by the edges' kind>'."""
    hops = ", ".join(f"{a} on {b} in {w}" for a, b, w in d.hops)
    return f"deadlock: ranks {', '.join(map(str, d.members))} wait on each other in a cycle ({hops}): {_cycle_why(d)}"


def _cycle_why(d: Deadlock) -> str:
    """What the cycle's edges say: a pair that both send first, both receive first, or collectives of groups
    called in different orders."""
    # 'send', or the recorder's 'Send seq 4'
    ops = {(e.op or "").split(" ")[0].lower() for e in d.edges if e.point_to_point}
    if ops and len(ops) == 1 and all(e.point_to_point for e in d.edges):
        two = len(d.members) == 2  # a pair: 'the other' and 'neither', not 'the next' and 'none'
        nxt, none = ("the other", "neither") if two else ("the next", "none")
        if ops == {"send"}:
            return f"each sends to {nxt} first, and {none} posts the receive the other's send waits for"
        if ops == {"recv"}:
            return f"each receives from {nxt} first, and {none} posts the send the other's receive waits for"
    if ops:
        return "each waits in a send or receive, or a collective, that the next does not post"
    return "these ranks call these groups' collectives in different orders"


def _word_links(verdict: Verdict) -> None:
    """The typed demotions and deadlock edges get their words (JSON 'demoted', the deadlock's 'where')."""
    if verdict.deadlock is not None:
        verdict.deadlock.wheres = tuple(where(e) for e in verdict.deadlock.edges)
    for s in verdict.suspects:
        for x in (s, *s.agreeing, *s.consequences):
            if x.demotion is not None:
                x.demotion.said = demoted(x.demotion)


#: observations said whatever the verdict
_ALWAYS_SAID = (ObservationKind.CLAIM, ObservationKind.PEER)


def write(verdict: Verdict, progress: Any = None, slow: Any = None) -> None:
    """Fill the summary and the lines of `verdict` (`progress`: judges.progress; `slow`: judges.slowness).
    Every field it fills is set afresh, so wording a verdict twice says the same."""
    _word_links(verdict)
    verdict.stragglers, verdict.shows = [], []
    for gap in verdict.sections.get("evidence_gaps") or []:  # what a post-mortem lacks: said once, however often worded
        if (line := evidence_gap(gap)) not in verdict.missing_evidence:
            verdict.missing_evidence.append(line)
    waiting = verdict.sections.get("waiting") or {}
    ranks, activity = waiting.get("ranks", []), waiting.get("activity")
    head = verdict.culprit
    named = {c.rank for c in [head, *verdict.joint] if c is not None}  # the head and the ranks of its own fault
    if head is not None and waiting.get("groups"):  # said without the culprits, whose own lines say what they do
        activity = words_of_waits(waiting["groups"], named)
    verdict.leads = leads(verdict.suspects) if head is None else []
    verdict.consequences = consequences(head, [r for r in ranks if r not in named], activity, set(verdict.hung_ranks))
    for other in verdict.independent:  # each further culprit's own consequences, said with its rank
        verdict.consequences += [f"{other.label}: {line}" for line in consequences(other, [], None)]
    running = progress is not None and progress.decided and progress.running
    slow_text = slow.describe() if slow is not None else ""
    judged = running or (head is not None and str(head.reason_class) in ("straggler", "slow-host", "slow-link"))
    if slow_text and (running or slow.named):
        verdict.stragglers = [slow_text if judged
                              else f"{slow_text} (shown, not judged: hang or progress not decided from time)"]
    if verdict.deadlock is not None:
        verdict.summary = deadlock(verdict.deadlock)
        verdict.shows = [observed(o) for o in verdict.observations]
    elif head is not None and verdict.joint:
        verdict.summary = alike([head, *verdict.joint])
    elif head is not None and verdict.independent:
        verdict.summary = several(verdict.culprits)
    elif head is not None:
        verdict.summary = (f"{head.label} {said(head)}" + (f": {head.why}" if head.why else "")
                           + (f". Recommended action: {head.action}" if head.action else ""))
    else:
        verdict.shows = [observed(o) for o in verdict.observations]
        verdict.summary = no_culprit(verdict, ranks, activity)
    # a rank two processes claim is said whatever the verdict: both sources, for the reader to check; so is whom a
    # lost connection or a size mismatch names (the pair a mismatch is between is part of its why)
    verdict.shows += [x for x in (observed(o) for o in verdict.observations if o.kind in _ALWAYS_SAID)
                      if x not in verdict.shows]
    if head is not None and verdict.hang == "not established" and not head.reason_class.observed:
        # a snapshot's reading ('in no collective') is a hang culprit only if the job hangs, which time has not shown
        verdict.summary += (". Hang not established: one snapshot, no time-stamped progress (read it as: if the job "
                            "hangs)")
    if running:
        lead = progress.describe()
        if head is None and slow is not None and slow_text and not slow.named:
            # nothing slow named: the summary says so in a phrase, the figures behind it are a line of their own
            # ('slow:'); no pointer to them, which would point at nothing where an output leaves that line out
            verdict.summary = f"{lead}; no rank, host or link is named slow"
            verdict.shows = [slow_text] + [x for x in verdict.shows if x != slow_text]
        elif head is None or str(head.reason_class) in ("straggler", "slow-host", "slow-link"):
            verdict.summary = f"{lead}; {slow_text}" if slow_text else lead
        else:
            verdict.summary = f"{verdict.summary} ({lead})"


#: the longest summary of several culprits that says each one's reason in full (else each its class's words)
SEVERAL_MAX = 300


def several(culprits: list[Suspect]) -> str:
    """'2 independent culprits: A <reason>: <why>; B ...' (one sentence), as full as fits in SEVERAL_MAX."""
    lead = f"{len(culprits)} independent culprits: "  # each where its own ranks' wait ends (parsers/pipeline/sinks.py)
    text = ""
    # the fullest that fits: reason and why, the why, the class's words
    for say in (lambda c: f" {said(c)}" + (f": {c.why}" if c.why else ""),
                lambda c: f": {c.why}" if c.why else f" {said(c)}",
                lambda c: f": {c.reason_class.text}"):
        text = "; ".join(f"{c.label}{say(c)}" for c in culprits)
        if len(lead + text) <= SEVERAL_MAX and ". " not in text:
            break
    return lead + text


def alike(culprits: list[Suspect]) -> str:
    """'rank 0 (vm pid 1748) and rank 3 (vm pid 1751), each: <the head's reason>': the ranks of one fault, named
    alike (their reasons say the same of each)."""
    labels = [c.label for c in culprits]
    return f"{', '.join(labels[:-1])} and {labels[-1]}, each: {said(culprits[0])}"


def no_culprit(verdict: Verdict, ranks: list[int], activity: str | None) -> str:
    """'no culprit named: <what the evidence shows first>', with the waiting ranks where stacks show them."""
    first = "; ".join(observed(o) for o in verdict.observations[:IN_SUMMARY]
                      if o.kind is not ObservationKind.COVERAGE_NOTE)
    if verdict.hang == "not established" and any(s.demotion and s.demotion.unproven for s in verdict.suspects):
        return ("no culprit named: no time says the job hangs (no watchdog timeout, no recorder, no second look), so "
                "one snapshot is not judged as a wait (leads and stragglers below)")
    if ranks:
        return (f"no culprit named: ranks {fold(ranks)} {activity}, and no rank stands out"
                + (f"; {first}" if first else ""))
    if first:
        return f"no culprit named: {first}"
    if verdict.leads:
        return "no culprit named: no suspect reaches the naming bar (leads below)"
    return "no culprit named: no rank waits in a collective and none is stopped or missing"


def leads(suspects: list[Suspect], limit: int = 4) -> list[str]:
    """The suspects below the naming bar, one a line. Where several tie with the best (same reason, same
    confidence) they are said as a tie: a tie has no odd one out, and naming one side alone (a 1-against-1
    mismatch: rank 7 BROADCAST, rank 3 ALLREDUCE at one SeqNum) would read as a lead the lines do not give."""
    if not suspects:
        return []
    lead = suspects[0]
    tied = [s for s in suspects if s.reason_class == lead.reason_class and abs(s.confidence - lead.confidence) < 1e-9]
    if len(tied) > 1:
        tie = "; ".join(f"{s.label} {said(s)}" for s in tied[:limit])
        out = [f"tied weak leads, no odd one out: {tie} (confidence {lead.confidence:.2f} each)"]
    else:
        out = [f"weak lead only: {lead.label} {said(lead)} (confidence {lead.confidence:.2f})"]
    rest = [s for s in suspects if s not in tied][:limit - 1]
    return out + [f"lead: {s.label} {said(s)} (confidence {s.confidence:.2f})" for s in rest]


def consequences(head: Suspect | None, ranks: list[int], activity: str | None,
                 hung: AbstractSet[int] = frozenset()) -> list[str]:
    """What the culprit explains: the findings it is the cause of (folded by class), then the others' waits
    (only those in the hung scope, where time shows one: a healthy group's ranks in a kernel do not wait)."""
    if head is None:
        return []
    by_class: dict = {}
    for c in head.consequences:
        by_class.setdefault(c.reason_class, []).append(c)
    out = []
    for rc, cs in by_class.items():
        who = [c.rank for c in cs if c.rank is not None]
        if len(cs) == 1 or len(who) != len(cs):
            out += [f"explains: {c.label} {said(c)} [{rc}]" for c in cs]
        else:
            out.append(f"explains: ranks {fold(who)}: {rc.text} [{rc}]")
    victims = [r for r in ranks if r != head.rank and (not hung or r in hung)]
    if victims and activity:
        out.append(f"ranks {fold(victims)} {activity}")
    return out
