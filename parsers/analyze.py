"""One entry point from a bundle to a verdict: load evidence, apply every rule, merge suspects.

Sources, each independent: process state and stacks (parsers.judges.stacks), the NCCL
in-flight recorder (parsers.judges.recorder), host evidence and known errors
(parsers.judges.hosts). Each names suspects; they merge into one ranking, and the
summary is written last, from whichever suspect leads.
"""

from __future__ import annotations

from typing import Any

from forensics.bundle.reader import Bundle
from parsers import knowledge
from parsers.evidence import BundleEvidence, load_evidence
from parsers.judges.hosts import fold_into_verdict
from parsers.artifacts import load_directory, load_files
from parsers.judges.logs import correlate
from parsers.model import Verdict, WaitEdge
from parsers.readers.recorder import read_bundle_ranks
from parsers.judges.recorder import analyse, comm_rank_table, wait_edges
from parsers.suspects import merge_suspects
from parsers.judges.stacks import stack_verdict, summarize
from parsers.waiters import demote_waiters, wait_graph

#: Bundle collector -> artifact kind for the log correlation.
LOG_COLLECTORS = {"stdio": "rank-log", "nccl_log": "nccl-log", "flight_recorder": None}
HOST_LOG_FILES = {"ras_status.txt": "ras-text", "ras_verbose.txt": "ras-text", "ras_status.json": "ras-json"}

FROZEN_STATES = ("T", "t", "Z", "X", "D")


def analyze_bundle(bundle: Bundle, kb: knowledge.KnowledgeBase | None = None) -> tuple[Verdict, BundleEvidence]:
    """The verdict for a bundle, and the evidence it rests on (for tables and pictures)."""
    evidence = load_evidence(bundle)
    verdict = stack_verdict(evidence)
    edges, comm_ranks = _fold_recorder(verdict, bundle)
    global_edges = [(comm_ranks.get(e.comm_id, {}).get(e.waiter), comm_ranks.get(e.comm_id, {}).get(e.peer), f"{e.op or 'comm'} of comm {e.comm_id}") for e in edges]
    # Only the recorder's edges judge who waits: they name comm ranks that map surely to
    # global ranks. The log graph's edges are kept in verdict.graph for pictures.
    _fold_logs(verdict, bundle, edges, comm_ranks)
    fold_into_verdict(verdict, bundle, kb if kb is not None else knowledge.load())
    activities = {r.rank: r.activity for r in evidence.ranks if r.rank is not None}
    # Defensive: merge already puts a frozen process's fact ahead of any root claim about it.
    frozen = {r.rank for r in evidence.ranks if r.rank is not None and r.state in FROZEN_STATES}
    verdict.suspects = demote_waiters(verdict.suspects, activities, wait_graph(global_edges), frozen)
    verdict.summary = summarize(verdict)  # last: whichever suspect leads after every source
    verdict.sections["ranks"] = ranks_table(evidence)
    return verdict, evidence


def _fold_recorder(verdict: Verdict, bundle: Bundle) -> tuple[list[WaitEdge], dict[str, dict[int, int]]]:
    """Suspects and wait edges from NCCL recorder state files, where the bundle has them."""
    states, problems = read_bundle_ranks(bundle.root, bundle.manifest.ranks)
    verdict.missing_evidence += [f"recorder: {p}" for p in problems]
    if not states:
        return [], {}
    edges = wait_edges(states)
    stalls = analyse(states)
    verdict.sections["recorder"] = {
        "state_files": len(states),
        "stalls": [{"comm_id": st.comm_id, "op": st.op, "nranks": st.nranks, "edges": len(st.edges)} for st in stalls],
        "wait_edges": [e.__dict__ for e in edges],
    }
    verdict.suspects = merge_suspects(verdict.suspects, [s for st in stalls for s in st.suspects])
    return edges, comm_rank_table(states)


def _fold_logs(verdict: Verdict, bundle: Bundle, edges: list[WaitEdge], comm_ranks: dict[str, dict[int, int]]) -> None:
    """Correlate the ranks' logs, FR dumps and RAS answers into suspects and a wait-for graph."""
    files = []
    for rank in bundle.manifest.ranks:
        hints = {"host": rank.host, "pid": rank.pid, "rank": rank.rank}
        for collector, kind in LOG_COLLECTORS.items():
            for path in bundle.rank_files(rank, collector):
                files.append((path, dict(hints, kind=kind) if kind else dict(hints)))
    for host in bundle.manifest.hosts:
        for col in host.collectors:
            for rel in col.files:
                kind = HOST_LOG_FILES.get(rel.rsplit("/", 1)[-1])
                if kind and bundle.path(rel).is_file():
                    files.append((bundle.path(rel), {"host": host.host, "kind": kind}))
    if not files:
        return
    analysis = correlate(load_files(files), extra_edges=edges, comm_ranks=comm_ranks)
    verdict.sections["logs"] = analysis.sections
    verdict.graph = analysis.graph
    verdict.suspects = merge_suspects(verdict.suspects, analysis.suspects)


def ranks_table(ev: BundleEvidence) -> list[dict[str, Any]]:
    """One row per rank: identity, state and what its main thread does."""
    rows = []
    for r in ev.ranks:
        act = r.activity
        rows.append(
            {
                "rank": r.rank,
                "host": r.record.host,
                "pid": r.record.pid,
                "state": r.state,
                "activity": act.kind,
                "op": act.op,
                "where": act.where,
                "problems": r.problems,
            }
        )
    for m in ev.missing:
        rows.append({"rank": m.rank, "host": m.host, "pid": None, "state": None, "activity": "missing", "op": None, "where": None, "problems": [m.reason]})
    return sorted(rows, key=lambda row: (row["rank"] is None, row["rank"] or 0))


def analyze_directory(path) -> Verdict:
    """The verdict for a folder of loose artifacts as users keep them (logs, dumps, RAS, py-spy
    output under any names): only the log correlation applies, as no process was seen live."""
    artifacts = load_directory(path)
    analysis = correlate(artifacts)
    verdict = Verdict(suspects=list(analysis.suspects), graph=analysis.graph)
    verdict.sections["logs"] = analysis.sections
    verdict.missing_evidence = [f"{name}: {why}" for name, why in artifacts.skipped]
    verdict.summary = summarize(verdict)
    return verdict
