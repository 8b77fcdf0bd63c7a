"""One entry point from a bundle to a verdict: load evidence, apply every rule, merge suspects."""

from __future__ import annotations

from typing import Any

from forensics.bundle.reader import Bundle
from parsers.evidence import BundleEvidence, load_evidence
from parsers.model import Verdict
from parsers.verdict import stack_verdict


def analyze_bundle(bundle: Bundle) -> tuple[Verdict, BundleEvidence]:
    """The verdict for a bundle, and the evidence it rests on (for tables and pictures)."""
    evidence = load_evidence(bundle)
    verdict = stack_verdict(evidence)
    verdict.sections["ranks"] = ranks_table(evidence)
    return verdict, evidence


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
