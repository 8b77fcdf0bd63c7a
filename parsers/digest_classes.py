"""Judge a merged digest over its classes: which ranks are odd ones out, each class judged once.

Why: at 100,000 ranks, 12,000 ranks with the same stack class and the same position in each
communicator are one question, not 12,000. A merged digest (`parsers.digest_merge`, made on the
gateways and at the root) already holds them as classes with rank sets as ranges; this module applies
`parsers.digest.odd_ones_out`'s rule to those classes, so the cost follows the variety of the job (its
classes, histogram bars, flags and wait edges), not its size:
- a rank's own oddities (frozen or gone, a collector problem, no state after, an exit, an exception,
  an error that is no wait) were flagged on its host (`parsers.digest.rank_flags`): every flag's
  rank set is odd;
- a stack class (what the main thread does, in which collective) that is not the most common one;
- a position (last op and seq) of a communicator that is not its most common one;
- the recorder: when any rank waits on a peer, every rank with recorder state that waits on none
  (the ranks waited on, and the silent ones), and every rank without recorder state;
- a rank a host finding names (and its host's files);
- a process of unknown rank (read raw: no class can hold it).

What it answers is the set of ranks whose raw files analysis opens (`parsers.digest_first`); the
verdict itself still comes from the judges over the evidence. When the merged digest lost anything to
its caps (`dropped`, or a rank set at its range cap), its classes are no longer the whole job, and
`ClassJudgement.complete` is False: the caller then judges rank by rank.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from parsers.model.ranksets import MAX_RANGES, Intervals, count, difference, union
from parsers.model.summaries import ClassSummary, StackClass

#: more unranked processes than this and the class judgement is not used (each is read on its own)
MAX_UNRANKED = 1024


@dataclass
class ClassJudgement:
    """The odd ones out of a merged digest, and what was judged to find them."""

    ranks: Intervals = field(default_factory=list)  #: job ranks whose raw files are read
    processes: set[tuple[str | None, int]] = field(default_factory=set)  #: (host, pid) of unknown rank
    hosts: set[str] = field(default_factory=set)  #: hosts whose host files are read (a host finding)
    complete: bool = True
    why_not: str = ""
    judged: int = 0  #: classes, bars, flags and wait targets judged (each once, whatever its rank count)
    ranks_covered: int = 0  #: ranks the merged digest holds

    def summary(self) -> dict[str, Any]:
        return {"complete": self.complete, "why_not": self.why_not, "judged": self.judged,
                "ranks_covered": self.ranks_covered, "odd_ranks": count(self.ranks), "unranked": len(self.processes)}


def judge_classes(merged: ClassSummary) -> ClassJudgement:
    """The odd ones out of `merged`, every class judged once."""
    out = ClassJudgement(ranks_covered=merged.ranks)
    if merged.lossy:
        return _incomplete(out, "items beyond the merged digest's caps")
    if merged.without_digest:
        return _incomplete(out, f"{len(merged.without_digest)} host(s) without a usable digest")
    if len(merged.unranked) > MAX_UNRANKED:
        return _incomplete(out, f"{len(merged.unranked)} processes of unknown rank")
    if any(len(iv) >= MAX_RANGES for iv in _all_sets(merged)):
        return _incomplete(out, "a rank set at its range cap")
    odd: Intervals = []
    for iv in merged.flags.values():  # each rank's own oddities, flagged on its host
        odd = union(odd, iv)
        out.judged += 1
    odd = union(odd, _minorities(_by_kind_op(merged.stacks), out))
    for hist in merged.comms.values():
        odd = union(odd, _minorities(hist, out))
    odd = union(odd, _recorder(merged, out))
    for f in merged.host_findings:
        out.judged += 1
        if f.rank is not None:
            odd = union(odd, [[f.rank, f.rank]])
        if f.host is not None:
            out.hosts.add(f.host)
    if len(odd) >= MAX_RANGES:
        return _incomplete(out, "the odd ones out are too scattered for a rank set")
    out.processes = set(merged.unranked)
    out.ranks = odd
    return out


def _incomplete(out: ClassJudgement, why: str) -> ClassJudgement:
    out.complete, out.why_not = False, why
    return out


def _all_sets(merged: ClassSummary):
    yield from (c.ranks for c in merged.stacks.values())
    yield from merged.flags.values()
    yield from (iv for hist in merged.comms.values() for iv in hist.values())
    yield from (iv for peers in merged.waits.values() for iv in peers.values())
    yield merged.recorder_ranks


def _by_kind_op(stacks: dict[str, StackClass]) -> dict[str, Intervals]:
    """Stack classes grouped as `odd_ones_out` compares them: by what the main thread does and in which
    op (where it sits elsewhere is one class: a rank's own line numbers do not make it odd)."""
    groups: dict[str, Intervals] = {}
    for cls in stacks.values():
        key = f"{cls.kind}|{cls.op}"
        groups[key] = union(groups.get(key, []), cls.ranks)
    return groups


def _minorities(hist: dict[str, Intervals], out: ClassJudgement) -> Intervals:
    """Every bar of a histogram smaller than its tallest: the ranks not where most are."""
    out.judged += len(hist)
    if len(hist) <= 1:
        return []
    sizes = {k: count(iv) for k, iv in hist.items()}
    top = max(sizes.values())
    odd: Intervals = []
    for k, iv in hist.items():
        if sizes[k] < top:
            odd = union(odd, iv)
    return odd


def _recorder(merged: ClassSummary, out: ClassJudgement) -> Intervals:
    """When anyone waits on a peer in the recorder, the ranks with recorder state that wait on none: the
    peers waited on and the silent members (`odd_ones_out`'s recorder rule, over rank sets)."""
    waiting: Intervals = []
    for peers in merged.waits.values():
        for iv in peers.values():
            waiting = union(waiting, iv)
            out.judged += 1
    if not waiting:
        return []
    # and the ranks without recorder state while others have it: a peer waited on may be one of them (the recorder
    # judge's 'no recorder state while its peers wait on it'; which job rank a comm rank without state is, only
    # the ranks with state say)
    return union(difference(merged.recorder_ranks, waiting), difference(merged.summarised, merged.recorder_ranks))
