"""The one view of a verdict that every output renders: text, --json, the HTML report, the notebook.

Why one: each output used to derive its own facts from the verdict (the text its straggler
lines from the sections, the HTML its ranks from the stacks only, the notebook its graph),
so they disagreed, and a logs-only post-mortem drew empty pictures. `build_view` derives
everything once, from the verdict and the typed results it rests on (the logs judge's
per-rank last operations, the evidence's collection time); renderers lay it out and
derive nothing. Nothing here re-reads events.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass, field
from typing import Any, Iterable

import networkx as nx

from forensics.report.advice import CYCLE_ADVICE, P2P_CYCLE_ADVICE, advise
from forensics.report.lastop import (TimelineEntry, add_events, entries_from_ops, merged_tree, op_events,
                                     timeline_from_verdict)
from forensics.report.waitgraph import correlated_graph, mark_suspects, waitfor_from_verdict
from forensics.report.words import observed, said, worded
from forensics.report.words import hostfaults, mixed
from parsers.judges.logs.lastops import comm_words
from parsers.model import Suspect, Verdict
from parsers.model.findings import HostNote, ObservationKind, RankNote
from parsers.model.ranges import fold
from forensics.report.stacktree import render_tree
from forensics.hostset import HostSetError, fold as fold_hosts, validate_host



@dataclass(frozen=True)
class CulpritView:
    """The named culprit: who, why in the judges' terms, what that means in plain words, what to do next."""

    label: str
    rank: int | None
    host: str | None
    pid: int | None
    reason_class: str
    confidence: float
    reason: str
    meaning: str
    next_step: str
    evidence: tuple[str, ...]
    agreeing: tuple[str, ...]  #: "(source): reason_class: reason" of each agreeing finding
    sources: tuple[str, ...]
    host_fault: str | None = None  #: the hardware fault on its own host, where the host judge found one (the why)

    @property
    def sources_line(self) -> str:
        """'sources that agree: logs, stacks' or 'one source only: stacks': the same words in every output."""
        if len(self.sources) > 1:
            return f"sources that agree: {', '.join(self.sources)}"
        return f"one source only: {self.sources[0] if self.sources else 'unknown'}"

    def to_dict(self) -> dict[str, Any]:
        return {"label": self.label, "rank": self.rank, "host": self.host, "pid": self.pid,
                "reason_class": self.reason_class, "confidence": round(self.confidence, 3), "reason": self.reason,
                "meaning": self.meaning, "next_step": self.next_step, "sources": list(self.sources),
                "host_fault": self.host_fault}


@dataclass
class ReportView:
    """Everything an output shows, derived once (see module doc)."""

    verdict: Verdict
    source: str = ""  #: the input it was read from
    headline: str = ""  #: the VERDICT sentence(s)
    hang: str = ""  #: 'hang (what decided it)'
    times: str | None = None  #: 'the collection at ... (the manifest's creation time)': what ages are measured from
    culprits: list[CulpritView] = field(default_factory=list)  #: one, or several independent sinks (issue 26 item 2.4)
    deadlock: list[str] = field(default_factory=list)  #: 'rank a waits on rank b in ...', one a member edge
    deadlock_next_step: str | None = None
    leads: list[str] = field(default_factory=list)
    stragglers: list[str] = field(default_factory=list)
    consequences: list[str] = field(default_factory=list)
    shows: list[str] = field(default_factory=list)  #: what the evidence shows, not already in the headline
    others: list[str] = field(default_factory=list)  #: the other suspects, folded by what they say
    missing: list[str] = field(default_factory=list)  #: missing evidence, host notes folded by host set
    classes: list[dict[str, Any]] = field(default_factory=list)  #: ranks by what their main thread does
    stack_lines: list[str] = field(default_factory=list)  #: the merged stack tree as text
    stack_tree: dict[str, Any] = field(default_factory=dict)  #: as the analysis made it
    merged_stack_tree: dict[str, Any] = field(default_factory=dict)  #: address-only frames normalised
    rank_rows: list[dict[str, Any]] = field(default_factory=list)  #: one row per rank, stacks and logs merged
    timeline: list[TimelineEntry] = field(default_factory=list)  #: where each rank stopped
    timeline_axis: str | None = None  #: the numbering the chart's positions are in, when logs give them
    #: '[0-346,348-511] allreduce #10', ranks folded by where logs stop
    logs_stop: list[str] = field(default_factory=list)
    logs_stop_in: str | None = None  #: the numbering and communicator of `logs_stop`
    graph: nx.DiGraph = field(default_factory=nx.DiGraph)  #: wait-for graph, suspects marked
    hosts: list[dict[str, Any]] = field(default_factory=list)  #: the host verdicts
    #: hosts to exclude or suspect, folded by finding, exclude first (forensics.report.words.hostfaults)
    host_faults: list[hostfaults.HostFault] = field(default_factory=list)
    #: kernel lines set against each host's job start: those left out as older, a line per host set, bounded
    #: (forensics.report.words.hostfaults.kernel_time_lines)
    kernel_times: list[str] = field(default_factory=list)
    mixed: list[str] = field(default_factory=list)  #: files from another job, each a line (words/mixed.py)
    #: where the evidence holds only some ranks (the rest judged from their digests' classes): what the per-rank
    #: pictures and tables cover, said beside them ('' when they cover every rank read)
    read_only: str = ""

    @property
    def culprit(self) -> CulpritView | None:
        """The first (or only) culprit."""
        return self.culprits[0] if self.culprits else None

    @property
    def suspects(self) -> list[Suspect]:
        return self.verdict.suspects

    @property
    def edges(self) -> list[tuple[int, int, dict[str, Any]]]:
        return list(self.graph.edges(data=True))

    def no_stack_note(self) -> str | None:
        """'no stack: rank 2 (missing)' for ranks the stack tree cannot show (None with no stacks at all)."""
        in_tree = set(self.merged_stack_tree.get("ranks") or [])
        if not in_tree:
            return None
        kinds: dict[str, list[int]] = {}
        for e in self.timeline:
            if e.rank not in in_tree:
                kinds.setdefault(e.reason_class or e.activity, []).append(e.rank)
        if not kinds:
            return None
        return "no stack: " + "; ".join(f"rank{'s' if len(r) > 1 else ''} {fold(r)} ({k})" for k, r in kinds.items())

    def to_json(self) -> dict[str, Any]:
        """The --json document's body: the verdict's keys as they always were (scripts read them), its
        lines as the view says them, and what the view adds (plain words, times, folded missing evidence)."""
        data = self.verdict.to_dict()
        data.update(leads=list(self.leads), stragglers=list(self.stragglers), consequences=list(self.consequences),
                    shows=list(self.shows))
        data["advice"] = self.culprit.to_dict() if self.culprit else None
        data["times"] = self.times
        data["missing_folded"] = list(self.missing)
        data["host_faults"] = [f.to_dict() for f in self.host_faults]
        data["exclude_list"] = hostfaults.exclude_list(self.host_faults)
        return data

    @property
    def host_lines(self) -> list[str]:
        """The host faults, one line per finding shared by a host set (every output says these words)."""
        return [f.said() for f in self.host_faults]


def build_view(verdict: Verdict, *, source: str = "", evidence: Any = None, logs: Any = None,
               graph: nx.DiGraph | None = None, events: Iterable[dict[str, Any]] | None = None,
               collected: str | None = None) -> ReportView:
    """The view of `verdict`. `evidence` (parsers.gather.evidence.Evidence) dates it; `logs` (the logs judge's
    LogAnalysis) gives each rank's last operation; `graph` replaces the wait-for graph; `events`
    ({rank, seq, op, state, source}) add positions to the stack timeline; `collected` is said as the time."""
    ops = list(getattr(logs, "last_ops", None) or [])
    worded(verdict)  # parsers/ returns it typed: its words are presentation's, written here for every output
    view = ReportView(verdict=verdict, source=source, headline=verdict.summary)
    # 'hang: established (timeouts: ...)', never 'hang: hang (...)': the line's label says what is decided
    view.hang = (("established" if verdict.hang == "hang" else verdict.hang)
                 + (f" ({verdict.hang_basis})" if verdict.hang_basis else ""))
    view.times = collected if collected is not None else (collection_time(evidence) if evidence is not None else None)
    view.hosts = list(verdict.sections.get("hosts") or [])
    view.host_faults = hostfaults.host_faults(view.hosts)
    view.kernel_times = hostfaults.kernel_time_lines(view.hosts)
    view.mixed = mixed.lines(verdict.sections.get("mixed_inputs") or [])
    view.culprits = [culprit_view(c, view.host_faults) for c in verdict.culprits]
    for c in view.culprits[:1]:
        if c.host_fault:
            own = hostfaults.own_host_fault(view.host_faults, c.host)
            view.headline += f"; {hostfaults.headline_note(own, c.host)}"
    if verdict.deadlock is not None:
        view.deadlock = [f"rank {a} waits on rank {b} in {w}" for a, b, w in verdict.deadlock.hops]
        p2p = all(e.point_to_point for e in verdict.deadlock.edges)
        view.deadlock_next_step = (P2P_CYCLE_ADVICE if p2p else CYCLE_ADVICE).next_step
    view.leads, view.stragglers = list(verdict.leads), list(verdict.stragglers)
    # each fact said once: not again as a consequence
    said_already = {str(e) for c in verdict.culprits for e in c.evidence}
    view.consequences = [x for x in verdict.consequences if x not in said_already]
    host_said = ({observed(o) for o in verdict.observations if o.kind is ObservationKind.HOST} if view.host_faults
                 else set())
    # a host fault's own line says it; the 'slow:' line says the straggler figures
    view.shows = [x for x in verdict.shows
                  if x not in verdict.summary and x not in host_said and x not in view.stragglers]
    view.others = fold_suspects([s for s in verdict.suspects[1:] if s not in verdict.culprits])
    view.missing = fold_missing(verdict.missing_evidence)
    view.classes = list(verdict.sections.get("classes") or [])
    view.stack_lines = render_tree(verdict.stack_tree) if verdict.stack_tree is not None else []
    view.stack_tree = verdict.sections.get("stack_tree") or {"frame": "<all>", "ranks": [], "children": []}
    view.merged_stack_tree = merged_tree(view.stack_tree)
    view.rank_rows = rank_rows(verdict, ops)
    view.timeline, view.timeline_axis = timeline(verdict, ops, events)
    focus = (verdict.sections.get("digests") or {}).get("focus") or {}
    if focus.get("why"):
        cov = verdict.sections.get("coverage") or {}
        view.read_only = (f"the {cov.get('ranks_read_raw', '?')} ranks read on {focus['hosts_read']} "
                          f"host(s); the other "
                          f"{focus['ranks_judged_from_classes']} are judged from their digests' classes (ranks by what "
                          "their main thread does, and where the logs stop, count every rank)")
    view.logs_stop, view.logs_stop_in = logs_stop(ops, focus.get("positions") or {})
    view.graph = wait_graph(verdict, view.rank_rows, graph)
    return view


def cited(e: Any) -> str:
    """An evidence line with the tool its typed citation names, where its words do not already show their source
    (`tagged`, set where the citation was made)."""
    tool = getattr(e, "tool", None)
    return f"{e} [{tool}]" if tool and not getattr(e, "tagged", False) else str(e)


def culprit_view(c: Suspect, faults: list[hostfaults.HostFault] = ()) -> CulpritView:
    """The culprit in plain words; where its own host has a hardware fault, that fault is the why and draining the
    host is the next step (what the rank did is the fault's symptom)."""
    advice = advise(c)
    meaning, step = advice.meaning, c.action or advice.next_step
    own = hostfaults.own_host_fault(faults, c.host)
    if own is not None:
        meaning, step = hostfaults.culprit_why(own, c.host), hostfaults.culprit_action(own, c.host)
    return CulpritView(
        label=c.label, rank=c.rank, host=c.host, pid=c.pid, reason_class=str(c.reason_class), confidence=c.confidence,
        reason=c.reason, meaning=meaning, next_step=step, host_fault=own.said() if own is not None else None,
        evidence=tuple(cited(e) for e in c.evidence),
        agreeing=tuple(f"({a.source or 'another judge'}): {a.reason_class}: {a.reason}" for a in c.agreeing),
        sources=tuple(c.sources))


def rank_rows(verdict: Verdict, ops: list[Any]) -> list[dict[str, Any]]:
    """One row per rank: the process evidence's row (state, what its main thread does), with where its
    logs stop (`last_op`); a rank known from logs only gets a row of its own (host, pid, last operation)."""
    suspects: dict[int, Suspect] = {}
    for s in reversed(verdict.suspects):  # most likely last, so it wins
        if s.rank is not None:
            suspects[s.rank] = s
    culprits = {c.rank for c in verdict.culprits if c.rank is not None}
    by_rank = {o.rank: o for o in ops}
    rows, seen = [], set()
    for row in verdict.sections.get("ranks") or []:
        rank = row.get("rank")
        seen.add(rank)
        op = by_rank.get(rank)
        rows.append(dict(row, last_op=op.text if op else None))
    for o in ops:
        if o.rank not in seen:
            rows.append({"rank": o.rank, "host": o.host, "pid": o.pid, "state": None, "activity": "logged", "op": o.op,
                         "where": None, "problems": [], "last_op": o.text,
                         "label": f"logs stop at {o.op or 'op'} #{o.seq}"})
    rows.sort(key=lambda r: (r.get("rank") is None, r.get("rank") or 0))
    for row in rows:
        s = suspects.get(row.get("rank"))
        row.update(suspect=s is not None, culprit=row.get("rank") in culprits,
                   reason_class=str(s.reason_class) if s else None, confidence=s.confidence if s else None)
    return rows


def timeline(verdict: Verdict, ops: list[Any],
             events: Iterable[dict[str, Any]] | None) -> tuple[list[TimelineEntry], str | None]:
    """Where each rank stopped: from the stacks, with the logs' positions merged in; from the logs alone
    when there are no stacks. The axis names the numbering and communicator when logs give positions."""
    entries = timeline_from_verdict(verdict)
    axis = None
    if ops:
        main = max({o.comm for o in ops}, key=lambda c: sum(o.comm == c for o in ops))
        first = next(o for o in ops if o.comm == main)
        axis = f"{first.op or 'operation'} position ({_axis_words(first)}; where each rank's logs stop)"
        if entries:
            add_events(entries, op_events(o for o in ops if o.comm == main))
            if any(e.seq is None for e in entries):  # the chart stays in the stacks' program order
                axis = None
        else:
            entries = entries_from_ops(ops, verdict)
    if events:
        add_events(entries, events)
    return entries, axis


def logs_stop(ops: list[Any], job: dict[str, list] | None = None) -> tuple[list[str], str | None]:
    """Where the logs stop, ranks folded by operation (the main communicator's; others' ranks said as one line).
    `job`: per communicator, the whole job's positions as [ranks, op, seq] (the digests' classes, where the
    evidence holds only the ranks read: parsers.scale.focus), said for the main communicator instead."""
    if not ops:
        return [], None
    main = max({o.comm for o in ops}, key=lambda c: sum(o.comm == c for o in ops))
    first = next(o for o in ops if o.comm == main)
    if (job or {}).get(main):
        return [f"[{ranks}] {op} #{seq}" for ranks, op, seq in job[main]], _axis_words(first)
    groups: dict[tuple, list[int]] = {}
    for o in ops:
        if o.comm == main:
            groups.setdefault((o.op or "operation", o.seq, o.completed), []).append(o.rank)
    lines = [f"[{fold(r)}] {op} #{seq}" + (f", completed #{done}" if done is not None and done != seq else "")
             for (op, seq, done), r in sorted(groups.items(), key=lambda kv: kv[1][0])]
    elsewhere = [o.rank for o in ops if o.comm != main]
    if elsewhere:
        lines.append(f"[{fold(elsewhere)}] only in another communicator (the ranks table says where)")
    return lines, _axis_words(first)


def _axis_words(op: Any) -> str:
    return comm_words(op.comm, op.numbering)


def wait_graph(verdict: Verdict, rows: list[dict[str, Any]], graph: nx.DiGraph | None = None) -> nx.DiGraph:
    """The wait-for graph: one given, else the log correlation's, else the stand-in from the verdict;
    every rank of `rows` a node with its facts, the suspects marked."""
    if graph is not None:
        g = graph.copy()
    else:
        g = correlated_graph(verdict, rows)
        if g is None:
            g = waitfor_from_verdict(verdict, rows)
    return mark_suspects(g, verdict)


# --- derived lines (used by every renderer through the view) ---------------------------------



def fold_missing(notes: list[str]) -> list[str]:
    """'host node001: no host evidence ...' x64 as one line 'hosts node[001-064]: no host evidence ...', and
    'rank 3 (node1 pid 7): gdb: timeout (...)' x8 as 'ranks 0-7 (host node1): gdb: timeout (...)': the notes of
    several hosts or ranks that say the same kind of thing share a line, as `clush -b` folds output."""
    out: list[Any] = []
    by_kind: dict[tuple[type, str], list[Any]] = {}
    for note in notes:
        if not isinstance(note, (HostNote, RankNote)):
            out.append(note)
            continue
        key = (type(note), getattr(note.note, "kind", note.note))  # a collector's note: its kind, not its seconds
        if key not in by_kind:
            out.append(key)  # placeholder: the folded line goes where the first host's or rank's note was
        by_kind.setdefault(key, []).append(note)
    return [_folded_note(by_kind[o]) if isinstance(o, tuple) else o for o in out]


def _folded_note(notes: list[Any]) -> str:
    """One line for the HostNotes or RankNotes of one kind: their hosts or ranks as a folded set; a detail that
    differs between ranks (a tool's seconds, a pid) is said for the first rank, the rest are in --json."""
    if len(notes) == 1:
        return str(notes[0])
    if isinstance(notes[0], HostNote):
        return f"{host_set([n.host for n in notes])}: {notes[0].note}"
    ranks = sorted({n.rank for n in notes if isinstance(n.rank, int)})
    unranked = sum(1 for n in notes if not isinstance(n.rank, int))
    who = ([f"rank{'s' if len(ranks) > 1 else ''} {fold(ranks)}"] if ranks else []) + \
        ([f"{unranked} process{'es' if unranked > 1 else ''} without a rank"] if unranked else [])
    hosts = list(dict.fromkeys(n.host for n in notes if n.host))
    first = notes[0].note
    said = str(first)
    if len({str(n.note) for n in notes}) > 1 and getattr(first, "detail", ""):
        said = f"{first.kind} (rank {notes[0].rank}: {first.detail}; each rank's in --json)"
    return " and ".join(who) + (f" ({host_set(hosts)})" if hosts else "") + f": {said}"


def host_set(hosts: list[str]) -> str:
    """'host node1' or 'hosts node[001-064]' (ClusterShell folding of plain host names; any other
    name is listed as it is, after them, and escaped where it is shown)."""

    plain, other = [], []
    for h in dict.fromkeys(hosts):
        try:
            plain.append(validate_host(h))
        except HostSetError:
            other.append(h)
    names = ([fold_hosts(plain)] if plain else []) + other
    return ("hosts " if len(hosts) > 1 else "host ") + ",".join(names)


def collection_time(evidence: Any) -> str | None:
    """When the evidence was collected, as the evidence states it: the manifest's creation time, else
    the newest recorder copy time, else the newest recorder heartbeat; 'the collection at
    2026-11-29 07:20:11 UTC (the manifest's creation time)', or None when nothing dates it.
    File times are not used: a checkout, an unpacked archive or a plain copy makes them the
    time of the copy, not of the collection."""
    when, source = evidence.collected_unix, "the manifest's creation time"
    if when is None:
        copies = [st.observed_ns for st in evidence.recorder if getattr(st, "observed_is_copy",
                                                                        False) and st.observed_ns]
        if copies:
            when, source = max(copies) / 1e9, "the recorder files' copy time"
    if when is None and evidence.recorder:
        when, source = max(st.heartbeat_ns for st in evidence.recorder) / 1e9, "the newest NCCL recorder heartbeat"
    if when is None:
        return None
    try:
        stamp = dt.datetime.fromtimestamp(when, dt.timezone.utc).strftime("%Y-%m-%d %H:%M:%S UTC")
    except (OverflowError, OSError, ValueError):
        return None
    return f"the collection at {stamp} ({source})"


def fold_suspects(suspects: list[Suspect]) -> list[str]:
    """One line per distinct claim: suspects whose reason differs only in their own rank share a line."""
    groups: dict[tuple[str, float, str], list[Suspect]] = {}
    for s in suspects:
        groups.setdefault((str(s.reason_class), round(s.confidence, 2), said(s)), []).append(s)  # said: no own 'rank N'
    out = []
    for (kind, conf, claim), group in groups.items():
        if len(group) == 1:
            s = group[0]
            out.append(f"{s.label} {s.reason}  [{kind}, {conf:.2f}]")
            continue
        ranks = [s.rank for s in group if s.rank is not None]
        out.append(f"ranks {fold(ranks)} ({len(group)}): {claim}  [{kind}, {conf:.2f}]")
    return out

