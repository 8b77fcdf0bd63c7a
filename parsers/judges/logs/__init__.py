"""Correlate every artifact of a job into one verdict: who broke the pattern, and why.

Pipeline: identities (global rank/host/pid) -> tables (progress per communicator,
missing-line table, mismatches) -> wait-for graph (networkx; roots and sink cycles)
-> suspects with evidence and confidence. Public entry point: `correlate()`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import AbstractSet, Any, Iterable

import networkx as nx

from parsers.model.ranges import fold_missing
from parsers.gather.evidence import Evidence
from parsers.gather.quiet_gc import pause_gc
from parsers.judges.logs import identity, lastops, tables, verdict, waitgraph
from parsers.model.events import INFO_KINDS, WAIT_ERRORS, ErrorEvent, RasFinding, TopoEdge
from parsers.model import Suspect, WaitEdge
from parsers.model.findings import CULPRIT_MIN_CONFIDENCE, Findings, JudgeContext

__all__ = ["LogAnalysis", "correlate", "judge"]

MAX_LISTED = 200  #: rows kept in JSON sections for huge jobs


@dataclass
class LogAnalysis:
    """What the correlation found. `sections` is JSON-able; `graph` is the wait-for graph."""

    suspects: list[Suspect] = field(default_factory=list)
    sections: dict[str, Any] = field(default_factory=dict)
    graph: nx.DiGraph = field(default_factory=nx.DiGraph)
    #: where each rank's logs stop (lastops.RankOp), every rank: the pictures of a logs-only post-mortem
    last_ops: list[lastops.RankOp] = field(default_factory=list)

    @property
    def culprit(self) -> Suspect | None:
        head = self.suspects[0] if self.suspects else None
        return head if head is not None and head.confidence >= CULPRIT_MIN_CONFIDENCE else None

    def to_dict(self) -> dict[str, Any]:
        return {"suspects": [s.to_dict() for s in self.suspects], "sections": self.sections}


#: the kinds of file the logs judge reads: without one, it has nothing to say
LOG_KINDS = frozenset({"nccl-log", "rank-log", "fr-report", "fr-dump", "ras-text", "ras-json", "pyspy-text",
                       "pyspy-json"})


def judge(ev: Evidence, ctx: JudgeContext) -> Findings:
    """The logs judge (the one protocol): logs, Flight Recorder dumps and RAS correlated into a wait-for graph
    (each edge typed), with the recorder's edges and communicator ranks (`ctx`); ranks the p2p judge sees
    waiting in a send/recv are not 'stopped before' a collective the others reached (the odd-one-out rule)."""
    if not any(a.kind in LOG_KINDS for a in ev.artifacts):
        return Findings("logs", judge="logs")
    recorder = ctx.of("recorder")
    found = correlate(ev, extra_edges=recorder.edges, comm_ranks=recorder.comm_ranks,
                      waiting_elsewhere=_in_p2p(ctx.of("p2p")))
    return Findings("logs", found.suspects, judge="logs", sections={"logs": found.sections}, graph=found.graph,
                    log_analysis=found)


def _in_p2p(p2p: Findings) -> set[int]:
    """Ranks the p2p judge sees waiting in a send or receive (its edges' waiters, and its `result`'s ranks:
    matched ops, and tracebacks that end in one): not 'stopped before' a collective the others reached."""
    return {e.waiter for e in p2p.edges} | set(p2p.p2p_waits.ranks if p2p.p2p_waits is not None else ())


def correlate(artifacts: Evidence, extra_edges: Iterable[WaitEdge] = (),
              comm_ranks: dict[str, dict[int, int]] | None = None,
              waiting_elsewhere: AbstractSet[int] = frozenset()) -> LogAnalysis:
    """Analyse loaded artifacts (plus WaitEdges from other sources) into suspects.

    `comm_ranks` (optional): communicator -> {comm rank: global rank} known elsewhere
    (e.g. the recorder's state files), used where the logs do not say it themselves.
    `waiting_elsewhere`: global ranks another judge sees waiting (in a send/recv): not 'stopped before' an op.
    """
    with pause_gc():
        return _correlate(artifacts, extra_edges, comm_ranks or {}, waiting_elsewhere)


def _correlate(artifacts: Evidence, extra_edges: Iterable[WaitEdge],
               comm_ranks: dict[str, dict[int, int]], waiting_elsewhere: AbstractSet[int] = frozenset()) -> LogAnalysis:
    ids = identity.build(artifacts)
    for comm, table in comm_ranks.items():
        known = ids.comm_ranks.setdefault(comm, {})
        for cr, g in table.items():
            known.setdefault(int(cr), int(g))
            ids.comm_members.setdefault(comm, set()).add(int(g))
    t = tables.build(artifacts, ids)
    providers: dict[str, set[int]] = {}
    for r, info in ids.ranks.items():
        for kind in info.kinds:
            providers.setdefault(kind, set()).add(r)
    tables.missing_line_table(t, ids)
    tables.find_mismatches(t, ids)
    ras_findings, errors = _collect(artifacts, ids)
    failed = {r for r, e in errors if r is not None and e.kind in WAIT_ERRORS}
    g = nx.DiGraph()
    unmapped: list[str] = []
    waitgraph.progress_edges(g, t, ids, providers, failed)
    waitgraph.proxy_edges(g, artifacts, ids, unmapped)
    waitgraph.extra_edges(g, extra_edges, ids, unmapped)
    roots, cycles = waitgraph.roots_and_cycles(g)
    suspects = verdict.build_suspects(t, g, roots, cycles, ids, ras_findings, errors,
                                      lambda: _ring_neighbours(artifacts, ids), complete=artifacts.coverage.complete,
                                      waiting_elsewhere=waiting_elsewhere, elsewhere=artifacts.elsewhere)
    sections = _sections(artifacts, ids, t, g, roots, cycles, unmapped, ras_findings, errors)
    ops = lastops.last_ops(t, ids, g)
    sections["last_ops"] = lastops.section(ops)
    return LogAnalysis(suspects=suspects, sections=sections, graph=g, last_ops=ops)


def _collect(arts: Evidence, ids: identity.Identities) -> tuple[list[RasFinding], list]:
    ras_findings: list[RasFinding] = []
    errors: list[tuple[int | None, ErrorEvent]] = []
    for art in arts.artifacts:
        if not art.parsed:
            continue
        for ev in art.parsed.events:
            cls = type(ev)
            if cls is RasFinding:
                ras_findings.append(ev)
            elif cls is ErrorEvent and ev.kind not in INFO_KINDS:
                errors.append((ids.resolve(ev.origin), ev))
    return ras_findings, errors


def _ring_neighbours(arts: Evidence, ids: identity.Identities) -> dict[int, set[int]]:
    """Global rank -> the global ranks next to it on some ring (NCCL ring and channel-connection lines).

    Why rings only: a large collective moves along the rings, so a rank that loses its
    socket mid-collective lost a ring neighbour; tree links would widen the guess.
    """
    out: dict[int, set[int]] = {}
    for art in arts.artifacts:
        if not art.parsed:
            continue
        for ev in art.parsed.events:
            if type(ev) is not TopoEdge or ev.kind not in ("ring", "channel"):
                continue
            a, b = ids.global_of(ev.comm, ev.src), ids.global_of(ev.comm, ev.dst)
            if a is not None and b is not None and a != b:
                out.setdefault(a, set()).add(b)
                out.setdefault(b, set()).add(a)
    return out


def _topology(arts: Evidence, ids: identity.Identities) -> dict[str, Any]:
    """Per communicator: how many ring/tree/channel neighbour pairs were seen, and a sample of ring pairs
    in global ranks where mappable (pairs are counted in comm ranks: no mapping for 100k ranks' lines)."""
    out: dict[str, dict[str, set]] = {}
    for art in arts.artifacts:
        if not art.parsed:
            continue
        for ev in art.parsed.events:
            if type(ev) is not TopoEdge:
                continue
            entry = out.get(ev.comm)
            if entry is None:
                if len(out) >= MAX_LISTED:
                    continue
                entry = out[ev.comm] = {"ring": set(), "tree": set(), "channel": set()}
            entry[ev.kind].add((ev.src, ev.dst))
    result = {}
    for comm, kinds in out.items():
        sample = []
        for src, dst in sorted(kinds["ring"])[:16]:
            a, b = ids.global_of(comm, src), ids.global_of(comm, dst)
            sample.append(str((a if a is not None else f"c{src}", b if b is not None else f"c{dst}")))
        result[comm] = {k: len(v) for k, v in kinds.items()} | {"ring_sample": sorted(sample)}
    return result


def _sections(arts, ids, t, g, roots, cycles, unmapped, ras_findings, errors) -> dict[str, Any]:
    edges = []
    for u, v, data in list(g.edges(data=True))[:MAX_LISTED]:
        edges.append({"waiter": u, "waits_on": v, "comm": data.get("comm"), "source": data.get("source"),
                      "reason": data.get("reason")})
    error_kinds: dict[str, list[int]] = {}
    for r, e in errors:
        if r is not None:
            error_kinds.setdefault(e.kind, []).append(r)
    return {
        "missing_lines": t.missing_lines[:MAX_LISTED],
        "mismatches": t.mismatches[:MAX_LISTED],
        "graph": {"nodes": g.number_of_nodes(), "edges": g.number_of_edges(), "roots": roots[:MAX_LISTED],
                  "cycles": cycles[:20], "edge_sample": edges, "unmapped_edges": unmapped[:MAX_LISTED]},
        "ranks": {
            "world_size": ids.world_size,
            "seen": len(ids.ranks),
            "hosts": {str(r): i.host for r, i in list(sorted(ids.ranks.items()))[:MAX_LISTED]},
            "no_evidence": fold_missing(ids.world_size or 0, ids.ranks),
            "unranked_files": ids.unranked[:MAX_LISTED],
        },
        "errors": {k: tables.compress(v) for k, v in error_kinds.items()},
        "topology": _topology(arts, ids),
        "ras": [{"comm": f.comm, "kind": f.kind, "comm_rank": f.comm_rank, "pid": f.pid, "host": f.host,
                 "text": f.text} for f in [f for f in ras_findings if f.kind != "count"][:MAX_LISTED]],
        "unknown_lines": {str(a.path): a.unknown_lines for a in arts.artifacts if a.unknown_lines},
        "files": {"read": len(arts.artifacts), "by_kind": _by_kind(arts),
                  "problems": [f"{a.path}: {a.error}" for a in arts.artifacts if a.error][:MAX_LISTED],
                  "skipped": [f"{p}: {why}" for p, why in arts.skipped][:MAX_LISTED]},
    }


def _by_kind(arts: Evidence) -> dict[str, int]:
    out: dict[str, int] = {}
    for a in arts.artifacts:
        out[a.kind] = out.get(a.kind, 0) + 1
    return out
