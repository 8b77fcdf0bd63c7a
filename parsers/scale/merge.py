"""Merge host digests up a tree: what 100,000 ranks look like, in a size that grows with their variety.

Why: as STAT merges stack traces at each level of its tree, a gateway (or the fleet's merge) folds its hosts'
digests into one class summary (`parsers.model.summaries.ClassSummary`: stack classes with rank sets as ranges,
per-communicator position histograms whose bars keep their rank sets, each rank's own oddities as rank sets,
recorder members and waits, the ranks each host summarised). The one merge is the model's (`merge`,
`merge_all`: associative, commutative, idempotent), so any tree shape gives the same root; this module adds what
the scale path asks of a class summary in words (`outliers`, `stack_classes`) and the bound on its encoding.

Input: a host digest's rank summaries (`parsers.scale.digest.read_digest`, typed and checked) and host findings,
through `from_host`; output: a `ClassSummary`, whose `to_json` is the merged digest document.
"""

from __future__ import annotations

from typing import Any

from parsers.judges.stacks import class_rows
from parsers.model.majority import tallest
from parsers.model.ranksets import MAX_RANGES, Intervals, count, difference, fold, holds, meets, ranks_of, union
from parsers.model.summaries import FORMAT, VERSION, ClassSummary, RankSummary, SummaryError, merge, merge_all, \
    of_host as from_host, without

#: a merged digest larger than this is refused unread (its size follows the job's variety: kB to a few MB)
MAX_MERGED_BYTES = 64 << 20


def from_document(doc: dict[str, Any]) -> ClassSummary:
    """A host digest's document ({'host', 'ranks', 'host_findings'}, as `parsers.scale.digest.make_digest` writes it) as
    the class summary of that host; SummaryError naming the first field that is not the model's."""
    host = doc.get("host")
    if not isinstance(host, str):
        raise SummaryError("a host digest without its host's name")
    ranks = doc.get("ranks")
    if not isinstance(ranks, list):
        raise SummaryError("a host digest without its rank summaries")
    findings = doc.get("host_findings")
    return from_host(host, [RankSummary.from_json(r) for r in ranks], findings if isinstance(findings, list) else [])


def outliers(merged: ClassSummary) -> dict[str, list[str]]:
    """Per communicator, the positions shorter than its tallest (`parsers.model.majority.tallest`: a tie of the
    tallest is no outlier, as the class judgement reads it), with their ranks folded: who is not where the others
    are (what a person looks at first)."""
    out: dict[str, list[str]] = {}
    for comm, hist in merged.comms.items():
        top = set(tallest({pos: count(iv) for pos, iv in hist.items()}))
        if said := [f"{pos}: ranks {fold(iv)}" for pos, iv in sorted(hist.items()) if pos not in top]:
            out[comm] = said
    return out


def stack_classes(merged: ClassSummary) -> list[str]:
    """The equivalence classes of main-thread stacks, largest first, with their rank ranges: the rows of the stacks
    judge's classes section (`parsers.judges.stacks.class_rows`, the one statement of them), a line each."""
    return [f"{row['count']} rank(s) {row['ranks']}: {row['activity']}"
            for row in class_rows((c, c.ranks) for c in merged.stacks.values())]


def check_merged(doc: Any) -> ClassSummary:
    """A merged digest from elsewhere (a gateway's answer: hostile like any input) read as the model's type,
    checked field by field (SummaryError, a ValueError, with the reason). Only checked documents are merged."""
    return ClassSummary.from_json(doc)


__all__ = ["FORMAT", "VERSION", "MAX_MERGED_BYTES", "MAX_RANGES", "ClassSummary", "Intervals", "SummaryError",
           "check_merged", "count", "difference", "fold", "from_document", "from_host", "holds", "meets", "merge",
           "merge_all", "outliers", "ranks_of", "stack_classes", "union", "without"]
