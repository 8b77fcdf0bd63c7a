"""One entry point from a bundle to a verdict: load evidence, apply every rule, merge suspects.

Sources, each independent: process state and stacks (parsers.verdict), the NCCL
in-flight recorder (parsers.recorder_waits), host evidence and known errors
(parsers.host_verdict). Each names suspects; they merge into one ranking, and the
summary is written last, from whichever suspect leads.
"""

from __future__ import annotations

from typing import Any

from forensics.bundle.reader import Bundle
from parsers import knowledge
from parsers.evidence import BundleEvidence, load_evidence
from parsers.host_verdict import fold_into_verdict
from parsers.model import Verdict
from parsers.readers.recorder import read_bundle_ranks
from parsers.recorder_waits import analyse, stalled_ranks, wait_edges
from parsers.suspects import merge_suspects
from parsers.verdict import stack_verdict, summarize

HOST_LED = ("host-fault", "known-error")


def analyze_bundle(bundle: Bundle, kb: knowledge.KnowledgeBase | None = None) -> tuple[Verdict, BundleEvidence]:
    """The verdict for a bundle, and the evidence it rests on (for tables and pictures)."""
    evidence = load_evidence(bundle)
    verdict = stack_verdict(evidence)
    _fold_recorder(verdict, bundle)
    fold_into_verdict(verdict, bundle, kb if kb is not None else knowledge.load())
    culprit = verdict.culprit
    if culprit is None or culprit.reason_class not in HOST_LED:
        verdict.summary = summarize(verdict)
    verdict.sections["ranks"] = ranks_table(evidence)
    return verdict, evidence


def _fold_recorder(verdict: Verdict, bundle: Bundle) -> None:
    """Suspects and wait edges from NCCL recorder state files, where the bundle has them."""
    states, problems = read_bundle_ranks(bundle.root, bundle.manifest.ranks)
    verdict.missing_evidence += [f"recorder: {p}" for p in problems]
    if not states:
        return
    edges = wait_edges(states)
    verdict.sections["recorder"] = {
        "state_files": len(states),
        "stalls": [{"comm_id": st.comm_id, "op": st.op, "nranks": st.nranks, "edges": len(st.edges)} for st in analyse(states)],
        "wait_edges": [e.__dict__ for e in edges],
    }
    verdict.suspects = merge_suspects(verdict.suspects, stalled_ranks(states))


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
