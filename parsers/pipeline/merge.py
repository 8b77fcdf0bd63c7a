"""The arbiter: every judge's typed findings into one causal verdict, in a fixed order.

1. hang or progress, from time (recorder, RAS reads, stack samples, step series, watchdog timeouts);
2. the hung scope: in a job that still completes collectives no 'the others wait on N' claim stands;
3. one wait-for graph over every source's edges, across communicators;
4. its sinks and cycles: a claim about a rank that waits itself is demoted; a cycle with no rank of
   its own evidence to explain it is a deadlock verdict that names every member; independent sinks
   (disjoint waiters, no path between them) are several culprits (parsers/pipeline/sinks.py);
5. the odd one out is the minority of a comparison (the judges' mismatch and went-ahead rules);
6. the why of each suspect from its own evidence, with explanation links: a finding that explains
   another about the same rank heads it, the other listed as its consequence, not a rival.
Findings about one rank from independent sources agree: the culprit says which sources.
The verdict is typed only: presentation words it (forensics.report.words) from these results.
"""

from __future__ import annotations

from typing import Any, Iterable

import networkx as nx

from parsers.gather.evidence import Evidence
from parsers.judges.activity import with_activity
from parsers.judges.gaps import evidence_gaps
from parsers.judges.hosts import plain_host
from parsers.judges.logs.waitgraph import roots_and_cycles
from parsers.judges.own_state import own_state
from parsers.judges.progress import hang_from_time
from parsers.model.states import frozen
from parsers.pipeline.sinks import independent_culprits
from parsers.model.findings import (ABSENCE_CLAIMS, ARTIFACT_ABSENCE, CULPRIT_MIN_CONFIDENCE, EXPLAINS, PROCESS_ABSENCE,
                                    ROOT_CLAIMS, SNAPSHOT_CLAIMS, STANDING_IN_A_RUNNING_JOB, Deadlock, Demotion,
                                    Findings, HostNote, ReasonClass as RC, Suspect, Verdict, WaitEdge, is_observed)
from parsers.stacks.classify import Activity

DEMOTE_FACTOR = 0.5
UNPROVEN = 0.45  #: a root claim's confidence where the hang itself is not established (a lead)
#: each further independent source that supports a named suspect takes this share of the way left to 0.99
#: (never over the naming bar from below; a diminishing step, so that a surer finding of one source is not
#: overtaken by a weaker one that others echo, and two sure ones do not both end at the cap)
AGREEMENT_SHARE = 0.25


def _fact(s: Suspect) -> bool:
    """Observed facts about the process or host lead, except a recorder freeze (kept as before: a claim)."""
    return is_observed(s.reason_class) and s.reason_class not in (RC.FROZEN_IN_OP, RC.EXITED_FIRST)


def _explains(cause: Suspect, other: Suspect) -> bool:
    """Whether `cause` heads `other` as its cause: a finding it explains, unless the cause is only a lead (below the
    naming bar: a side of a tied call mismatch) and the other is worth a name. Why: the cause keeps its own
    confidence, so a lead that headed a named finding would hide evidence of the rank's own."""
    return other.reason_class in EXPLAINS.get(cause.reason_class, ()) and (
        cause.confidence >= CULPRIT_MIN_CONFIDENCE or other.confidence < CULPRIT_MIN_CONFIDENCE)


def _headline(a: Suspect, b: Suspect) -> tuple[Suspect, Suspect, bool]:
    """(kept, other, explains): a cause heads what it explains; else a fact beats an inference; else the surer."""
    if _explains(a, b):
        return a, b, True
    if _explains(b, a):
        return b, a, True
    a_fact, b_fact = _fact(a), _fact(b)
    if a_fact != b_fact:
        return (a, b, False) if a_fact else (b, a, False)
    # the process's own absence heads what it left behind: the why, not the missing file
    if ((a.reason_class in PROCESS_ABSENCE) != (b.reason_class in PROCESS_ABSENCE)
            and {a.reason_class, b.reason_class} & ARTIFACT_ABSENCE):
        return (a, b, False) if a.reason_class in PROCESS_ABSENCE else (b, a, False)
    return (a, b, False) if a.confidence > b.confidence else (b, a, False)


def merge_suspects(*lists: Iterable[Suspect]) -> list[Suspect]:
    """One suspect per rank, most likely first: the other finding is a consequence of the headline (which keeps
    its own confidence) or agrees with it (the higher confidence of the two is kept); typed, never text."""
    best: dict[tuple, Suspect] = {}
    for s in (s for lst in lists for s in lst):
        key = (s.host, s.rank, s.pid) if s.rank is None else (s.rank,)
        if key not in best:
            best[key] = s
            continue
        keep, other, explains = _headline(s, best[key])
        keep.confidence = keep.confidence if explains else max(keep.confidence, other.confidence)
        (keep.consequences if explains else keep.agreeing).append(other)
        keep.agreeing += other.agreeing
        keep.consequences += other.consequences
        other.agreeing, other.consequences = [], []
        keep.host = keep.host if keep.host is not None else other.host
        keep.pid = keep.pid if keep.pid is not None else other.pid
        best[key] = keep
    return sorted(best.values(), key=Suspect.sort_key)


def wait_graph(edges: Iterable[WaitEdge], logs_graph: nx.DiGraph | None = None) -> nx.DiGraph:
    """One graph of global ranks: waiter -> rank it waits on, each edge's `edge` the typed WaitEdge (scope, op
    and seq, or p2p peer and p2p seq), from the judges' edges and the logs judge's graph."""
    g = nx.DiGraph()
    for a, b, data in (logs_graph.edges(data=True) if logs_graph is not None else ()):
        if isinstance(a, int) and isinstance(b, int) and a != b:
            g.add_edge(a, b, edge=data["edge"])
    for e in edges:
        if e.peer is not None and e.waiter != e.peer:
            g.add_edge(e.waiter, e.peer, edge=e)
    return g


def demote_waiters(suspects: list[Suspect], activities: dict[int, Activity], graph: nx.DiGraph,
                   frozen: set[int] = frozenset(), in_p2p: dict[int, str] | None = None) -> list[Suspect]:
    """Lower the confidence of root claims about ranks that wait themselves; re-sort.

    `frozen` ranks (stopped, zombie, in the kernel) are never demoted: a process that
    cannot run is where a wait ends, whatever its last stack or proxy step says.
    `in_p2p`: ranks waiting in a send or receive (the p2p judge's), rank -> the op in words: a rank that never
    reached a collective because it waits in a send/recv is not where the wait ends, even where no peer is known.
    """
    in_p2p = in_p2p or {}
    for s in suspects:
        if s.reason_class not in ROOT_CLAIMS or s.rank is None or s.rank in frozen:
            continue
        if s.rank in graph and graph.out_degree(s.rank):
            peer = next(iter(graph.successors(s.rank)))
            s.demotion = Demotion(waits_on=peer, edge=graph.edges[s.rank, peer].get("edge"))
        elif (act := activities.get(s.rank)) is not None and act.waiting:
            s.demotion = Demotion(blocked=act.text)
        elif s.rank in in_p2p:
            s.demotion = Demotion(blocked=f"it waits in {in_p2p[s.rank]}")
        if s.demotion is not None:
            s.confidence = round(s.confidence * DEMOTE_FACTOR, 3)
    return sorted(suspects, key=Suspect.sort_key)


def honest_absence(suspects: list[Suspect], coverage: Any) -> list[Suspect]:
    """Drop claims that rest on absence alone where the evidence does not cover the whole job: an excerpt
    of one rank's log says nothing of the ranks it does not mention (nobody copied their lines). A rank judged
    elsewhere (from its digest's classes, or kept on a gateway) left its files there: what is missing of it
    here (no dump, no recorder state, no line) says nothing of it."""
    if coverage.elsewhere:
        suspects = [s for s in suspects if not (s.reason_class in ARTIFACT_ABSENCE | {RC.ABSENT} and s.rank in
                                                coverage.elsewhere and s.rank not in coverage.reporting)]
    if coverage.complete:
        return suspects
    return [s for s in suspects
            if not (s.reason_class in ABSENCE_CLAIMS | {RC.NO_DUMP} and s.rank not in coverage.reporting)]


def agree(suspects: list[Suspect]) -> list[Suspect]:
    """A named suspect that independent sources support ranks above one that a single source does."""
    for s in suspects:
        if s.confidence >= CULPRIT_MIN_CONFIDENCE:
            for _ in s.sources[1:]:
                s.confidence += (0.99 - s.confidence) * AGREEMENT_SHARE
            s.confidence = round(min(0.99, s.confidence), 3)
    return sorted(suspects, key=Suspect.sort_key)


def unproven_hang(suspects: list[Suspect], verdict: Verdict, ev: Evidence) -> list[Suspect]:
    """Step 1's consequence: where no time says the job hangs (no watchdog timeout, no recorder, no second
    look), a snapshot claim (where each log stops, or one look at the processes) reads one moment of a job
    that may still run: a lead, never a hang culprit. Facts that need no time (stopped, exited, an
    exception of its own, a host fault, a mismatch at one position) still stand."""
    if verdict.hang != "not established":
        return suspects
    for s in suspects:
        if _of_one_look(s) and s.confidence >= CULPRIT_MIN_CONFIDENCE:
            s.confidence, s.demotion = UNPROVEN, Demotion(blocked=None, unproven=True)
    return sorted(suspects, key=Suspect.sort_key)


def _of_one_look(s: Suspect) -> bool:
    """A snapshot claim: one of SNAPSHOT_CLAIMS, or a wrong peer read from the stacks of one look (from the
    recorder's or the dumps' histories it is a fact of the whole history; from stacks, of one moment)."""
    return s.reason_class in SNAPSHOT_CLAIMS or s.reason_class == RC.WRONG_PEER and s.source == "stacks"


def healthy_scope(suspects: list[Suspect], hung: set[int], graph: nx.DiGraph | None,
                  clean: tuple[set[int], set[int]] = (frozenset(), frozenset())) -> list[Suspect]:
    """Step 2: a claim that 'the others wait on N' stands only where the waiting is in the hung scope: N or
    a rank that waits on it stalled or timed out. Ranks of a group that progresses are healthy, and their
    in-flight op is not a wait (a subgroup trains on while another hangs). A process that exited with code 0
    (`clean`: the ranks, and the pids of those whose rank is unknown) is healthy unless a rank of the hung scope
    waits on it: a group that finished its steps and exited is no fault of the group that hangs (a sys.exit(0)
    mid-training is one, where the others wait on it); nor is a rank absent while as many processes of unknown
    rank exited with code 0: those are its processes."""
    if not hung or graph is None:
        return suspects
    ranks, pids = clean
    absent = [s for s in suspects if s.reason_class == RC.ABSENT and s.rank not in hung]
    explained = {id(s) for s in absent} if absent and len(pids) >= len(absent) else set()

    def in_scope(s: Suspect) -> bool:
        if id(s) in explained:
            return False
        if s.reason_class == RC.EXITED and s.rank not in hung and (s.rank in ranks or s.rank is None and s.pid in pids):
            return s.rank is not None and s.rank in graph and bool(nx.ancestors(graph, s.rank) & hung)
        if _fact(s) or s.rank is None or s.rank in hung or s.rank not in graph:
            return True
        return bool(nx.ancestors(graph, s.rank) & hung)
    return [s for s in suspects if in_scope(s)]


#: what NCCL logs where a receive got more bytes than were posted: a size, type or order mismatch between two ranks
_TRUNCATED = "message truncated : receiving "
#: findings that a rank stopped (froze, exited, aborted, left nothing) which a truncated message in its own NCCL log
#: explains
_STOPPED_CLAIMS = {RC.FROZEN_IN_OP, RC.FROZEN, RC.EXITED, RC.EXITED_FIRST, RC.NO_DUMP, RC.NO_RECORDER_STATE,
                   RC.MISSING_LINE, RC.STALLED, RC.STALLED_FIRST, RC.WAIT_ROOT, RC.KNOWN_ERROR}


def truncation_follows_mismatch(verdict: Verdict, ev: Evidence, graph: nx.DiGraph) -> None:
    """Step 6 across ranks: where a rank called another collective (or count) than its peers, a peer that NCCL
    stopped with 'message truncated : receiving N bytes instead of M' in its own NCCL log (it received the odd
    rank's larger message, then aborted) stopped because of that mismatch: its freeze, abort or silence is a
    consequence listed under the mismatch, never the headline (issue 39's order mismatch, logs folder: the
    receiver's frozen recorder heartbeat headed the verdict, the broadcast under it). So is a root claim whose
    direct waiters (in `graph`) are only such stopped ranks and the odd rank itself (whose log runs one op ahead of
    theirs, past the collective it called alone)."""
    head = next((s for s in verdict.suspects
                 if s.reason_class == RC.MISMATCH and s.confidence >= CULPRIT_MIN_CONFIDENCE), None)
    if head is None:
        return
    stopped = {a.rank for a in ev.artifacts if a.rank is not None and a.parsed and a.kind == "nccl-log"
               and any(_TRUNCATED in getattr(e, "message", "") for e in a.parsed.events)}
    if not stopped:
        return

    def waited_on_by_stopped(s: Suspect) -> bool:
        waiters = set(graph.predecessors(s.rank)) if s.rank in graph else set()
        return s.reason_class in ROOT_CLAIMS and bool(waiters) and waiters <= stopped | {head.rank}
    follow = [s for s in verdict.suspects if s is not head and s.rank is not None
              and (s.rank in stopped and s.reason_class in _STOPPED_CLAIMS or waited_on_by_stopped(s))]
    if follow:
        head.consequences += follow
        verdict.suspects = [head] + [s for s in verdict.suspects if s is not head and s not in follow]


def clean_exits(ev: Evidence) -> tuple[set[int], set[int]]:
    """(ranks, pids of processes of unknown rank) that exited with code 0: the wait status /proc kept for a
    zombie, or the launcher's record."""
    done = [r for r in ev.ranks if r.proc is not None and r.proc.gone and r.proc.exit_status == 0]
    ranks = ({r.rank for r in done if r.rank is not None}
             | {x.rank for x in ev.exits if x.rank is not None and x.returncode == 0})
    return ranks, {r.record.pid for r in done if r.rank is None and r.record.pid is not None}


def explain_waiters(verdict: Verdict, graph: nx.DiGraph) -> None:
    """Step 6 across ranks: a finding about a rank that waits on the culprit (a path to it in the graph, or,
    for an op queued on the GPU, its main thread waiting while the culprit's does not) is a consequence
    of the culprit, listed under it, not a rival suspect."""
    head = verdict.culprit
    if head is None or head.reason_class == RC.WAIT_CYCLE:
        return
    head.agreeing, cycle = [a for a in head.agreeing if a.reason_class != RC.WAIT_CYCLE], \
        [a for a in head.agreeing if a.reason_class == RC.WAIT_CYCLE]
    head.consequences += cycle  # the culprit explains the cycle its waiters form: they have no evidence of their own
    upstream = nx.ancestors(graph, head.rank) if head.rank in graph else set()
    waiting = set((verdict.sections.get("waiting") or {}).get("ranks", ()))
    rest, joint = [], []
    for s in verdict.suspects[1:]:
        queued = s.reason_class == RC.GPU_QUEUED and s.rank in waiting
        if s.reason_class == head.reason_class in JOINT_CLAIMS and s.confidence >= CULPRIT_MIN_CONFIDENCE:
            joint.append(s)
        elif s.reason_class == RC.WAIT_CYCLE or s.rank is not None and (
                queued or (not _fact(s) and s.rank in upstream)):
            head.consequences.append(s)
        else:
            rest.append(s)
    verdict.joint = joint
    verdict.suspects = [head] + joint + rest


#: claims said of every rank of one fault alike (each of the ranks whose sends nobody answers): a fellow's claim is
#: not a consequence of the head's, though it waits on the head in the graph: it is named with it (Verdict.joint)
JOINT_CLAIMS = {RC.UNANSWERED}

#: culprits whose own evidence explains a cycle of waits around them: the waits it set off close on it
CYCLE_EXPLAINED = {RC.MISMATCH, RC.WRONG_PEER}


def find_deadlock(verdict: Verdict, graph: nx.DiGraph) -> None:
    """Step 4: a sink cycle of the graph is a deadlock, unless a suspect at the naming bar has a fact of its own
    (or a mismatch, or a wrong peer) that explains it. Only edges that can close a cycle count: a point-to-point
    wait whose peer's posted ops no history counts is a wait, never a deadlock's edge (p2p_match.py), nor is a
    stack's wait where no time says the job hangs (p2p_stacks.py: one look).
    The headline decides the culprit line: once the verdict is a deadlock, no claim outside the cycle stands
    as its culprit beside it (each is lowered to a lead, saying why); where a fact stands, no deadlock is said."""
    named = [s for s in verdict.suspects if s.confidence >= CULPRIT_MIN_CONFIDENCE]
    if any(_fact(s) or s.reason_class in CYCLE_EXPLAINED for s in named):
        return
    closing = nx.DiGraph()
    one_look = verdict.hang == "not established"  # a stack's wait is of one moment: no cycle of a job that may run
    closing.add_edges_from((a, b, d) for a, b, d in graph.edges(data=True)
                           if not isinstance(d.get("edge"), WaitEdge)
                           or d["edge"].can_close_a_cycle and not (one_look and d["edge"].source == "stacks"))
    _, cycles = roots_and_cycles(closing)
    cycle = next((c for c in cycles if all(isinstance(r, int) for r in c) and len(c) > 1), None)
    if cycle is None:
        return
    # one simple cycle of the component (strongly connected, so there is one; it may have no walk through all)
    order = [a for a, _ in nx.find_cycle(closing.subgraph(cycle), source=min(cycle))]
    order = order[order.index(min(order)):] + order[:order.index(min(order))]
    edges = tuple(closing.edges[a, b]["edge"] for a, b in zip(order, order[1:] + order[:1]) if closing.has_edge(a, b))
    verdict.deadlock = Deadlock(members=tuple(order), edges=edges)
    members = set(cycle)
    verdict.suspects = [s for s in verdict.suspects if s.rank not in members or _fact(s)]
    for s in verdict.suspects:
        if s.confidence >= CULPRIT_MIN_CONFIDENCE:
            s.confidence, s.demotion = UNPROVEN, Demotion(cycle=verdict.deadlock.members)


def note_hosts_and_gaps(verdict: Verdict, ev: Evidence, reports: list) -> None:
    """The host verdicts as a section, the hosts to exclude, and what is missing: each host's gaps, the
    evidence's problems, the files skipped and why."""
    verdict.sections["hosts"] = [r.to_dict() for r in reports]
    # never a placeholder or odd name
    if excluded := [r.host for r in reports if r.status == "exclude" and plain_host(r.host)]:
        verdict.sections["exclude_hosts"] = excluded
    for report in reports:
        verdict.missing_evidence += [HostNote(report.host, note) for note in report.missing]
    verdict.missing_evidence += [p for p in ev.problems if p not in verdict.missing_evidence]
    verdict.missing_evidence += [f"{name}: {why}" for name, why in ev.skipped]
    if gaps := evidence_gaps(ev):  # typed: forensics/report/words says them under what is missing
        verdict.sections["evidence_gaps"] = [g.to_dict() for g in gaps]


def merge_verdict(ev: Evidence, found: list[Findings]) -> Verdict:
    """One verdict from every judge's findings (`ev`: parsers.gather.evidence.Evidence), in the arbiter's order."""
    by = {f.judge: f for f in found}
    logs, progress, slow = by.get("logs"), by["progress"].progress, by["slowness"].slow
    logs_graph = logs.graph if logs is not None else None
    verdict = Verdict(missing_evidence=list(by["stacks"].missing), stack_tree=by["stacks"].stack_tree, graph=logs_graph)
    for f in found:
        verdict.sections.update(f.sections)
    verdict.hang, verdict.hang_basis, hung = hang_from_time(progress, *by["progress"].timeouts)  # step 1
    verdict.hung_ranks = sorted(hung)
    verdict.suspects = merge_suspects(*(f.suspects for f in found))
    note_hosts_and_gaps(verdict, ev, by["hosts"].reports)
    if progress is not None and progress.decided:
        verdict.sections["progress"] = progress.to_dict()
        if progress.running:  # step 2: a group that progresses is healthy; its in-flight ops are no waits
            verdict.suspects = [s for s in verdict.suspects if s.reason_class in STANDING_IN_A_RUNNING_JOB]
            verdict.sections.pop("waiting", None)
            if slow is not None:
                verdict.sections.update(slow.sections())
                pids = {r.rank: r.record.pid for r in ev.ranks if r.rank is not None}
                timing = Findings("timing", with_activity(slow.suspects(pids), ev)).suspects
                verdict.suspects = merge_suspects(verdict.suspects, timing)
    elif slow is not None and slow.named:
        note = {"judged": False, "note": "hang or progress not decided from time: shown, not judged"}
        verdict.sections.update({name: {**body, **note} for name, body in slow.sections().items()})
    edges = [e for f in found for e in f.global_edges()]
    graph = wait_graph(edges)  # step 3 (the recorder's and p2p edges; the logs judge weighs its own graph)
    activities = {r.rank: r.activity for r in ev.ranks if r.rank is not None}
    stuck = {r.rank for r in ev.ranks if r.rank is not None and frozen(r)}
    waits = by["p2p"].p2p_waits if "p2p" in by else None
    in_p2p = waits.ranks if waits is not None else None
    verdict.suspects = demote_waiters(verdict.suspects, activities, graph, stuck, in_p2p)
    deadlock_graph = wait_graph(edges, logs_graph)
    full = deadlock_graph.copy()
    full.add_edges_from(logs_graph.edges if logs_graph is not None else ())  # waiters on ranks no file names too
    verdict.suspects = unproven_hang(healthy_scope(verdict.suspects, hung, full, clean_exits(ev)), verdict, ev)
    verdict.suspects = agree(honest_absence(verdict.suspects, ev.coverage))
    truncation_follows_mismatch(verdict, ev, full)
    if progress is None or not progress.running:
        find_deadlock(verdict, deadlock_graph)
        explain_waiters(verdict, full)
        independent_culprits(verdict, full)  # step 4: independent sinks are several culprits
    for head in verdict.culprits or verdict.suspects[:1]:  # step 6: the why of each, from its own state
        own = own_state(ev, head)
        if own:  # the stack judge's own state and frame lines say the same, less precisely
            rest = [e for e in head.evidence if getattr(e, "tool", None) not in ("/proc", "stack-frame")]
            head.evidence = own + [e for e in rest if e not in own]
    verdict.sections["coverage"] = ev.coverage.to_dict()
    verdict.observations = by["observations"].observations
    verdict.progress, verdict.slow = progress, slow  # what the words need (forensics.report.words)
    return verdict
