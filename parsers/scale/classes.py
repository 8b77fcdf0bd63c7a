"""The odd ones out of a job: which ranks' raw files analysis opens, each rule stated once, over classes.

Why: at 100,000 ranks, 12,000 ranks with the same stack class and the same position in each
communicator are one question, not 12,000. The rules read a `RankGroups` view: the ranks grouped by each
thing they compare. A class summary of the hosts' digests (`parsers.model.summaries.ClassSummary`, made on
the hosts, gateways and the root) is one, and so is one gathered rank by rank from the evidence
(`parsers.model.summaries.gathered`, where the digests' classes are not the whole job): a single rank is a
class of one, so the same rules decide at 8 ranks and at 100,000, and the cost follows the variety of the job
(its classes, histogram bars, flags and wait edges), not its size:
- a rank's own oddities (frozen or gone, a collector problem, no state after, an exit, an exception,
  an error that is no wait) were flagged where its files are (`parsers.scale.digest.rank_flags`): every flag's
  rank set is odd;
- the stack classes (what the main thread does, in which collective) as the stacks judge compares them, by its
  one rule (`parsers.judges.stacks.compare_stacks`): outside every collective while others wait, waiting in
  another call than the majority's, a minority that went ahead, and ranks with no stack while most have one;
- every rank in a send that no rank answers (`parsers.judges.p2p.unanswered`: none in a receive, the rest in one
  collective), so that the judge, which names every one of them, reads them all;
- a position (last op and seq) of a communicator shorter than its tallest (`parsers.model.majority.minorities`:
  a tie of the tallest is no minority);
- the recorder: where each communicator's waits end (the ranks waited on that wait on none,
  `parsers.model.waits.wait_ends`, as the recorder judge names them: a class of healthy ranks that waits on none
  and that no rank waits on stays one class), and, while a comm rank waited on left no state (a silent member,
  `silent_members`), every rank without recorder state;
- both ends of every wait the stack-peer matching (parsers.judges.p2p_stacks) draws from the ranks' blocking
  sends and recvs (py-spy --locals' peers): its rules read a whole cycle of blocked waits and every rank posting
  toward a wrong peer, so the judges get every op their verdict rests on (a send and the receive that answers
  it are no wait: a pipeline that flows makes no rank odd);
- a rank a host finding names (and its host's files);
- a process of unknown rank (read raw: no class can hold it).

What it answers is the set of ranks whose raw files analysis opens (`parsers.scale.digest_first`); the
verdict itself still comes from the judges over the evidence. When the view lost anything to its caps
(`lossy`), or a host sent no usable digest, its classes are not the whole job and `ClassJudgement.complete`
is False: the caller then gathers every rank's summary from the evidence and asks the same rules.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Protocol

from parsers.judges.stacks import compare_stacks
from parsers.model.majority import minorities
from parsers.model.ranksets import MAX_RANGES, Intervals, count, difference, joined
from parsers.model.summaries import HostFinding, StackClass, comm_waits, job_ranks, p2p_calls
from parsers.model.waits import silent_members, wait_ends
from parsers.judges.p2p_stacks import MAX_RANKS, judge_stacks, stack_op
from parsers.judges.p2p import unanswered

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


class RankGroups(Protocol):
    """What the odd-ones-out rules read: ranks grouped by each thing they compare, each group with its rank set.
    `ClassSummary` satisfies it, whether folded from the digests (a class of many identical ranks) or gathered
    rank by rank from the evidence (a rank is a class of one)."""

    flags: dict[str, Intervals]
    stacks: dict[str, StackClass]
    comms: dict[str, dict[str, Intervals]]
    waits: dict[str, dict[str, Intervals]]
    members: dict[str, list[list[int]]]
    recorder_ranks: Intervals
    p2p: dict[str, Intervals]
    host_findings: tuple[HostFinding, ...]
    unranked: tuple[tuple[str | None, int], ...]
    lossy: bool
    without_digest: tuple[str, ...]

    @property
    def summarised(self) -> Intervals: ...

    @property
    def ranks(self) -> int: ...


def judge_classes(groups: RankGroups) -> ClassJudgement:
    """The odd ones out of `groups`, every class judged once; `complete` says whether the classes are the whole
    job (the odd ones are named either way)."""
    out = ClassJudgement(ranks_covered=groups.ranks)
    odd: Intervals = []
    for iv in groups.flags.values():  # each rank's own oddities, flagged where its files are
        odd.extend(iv)
        out.judged += 1
    odd.extend(compare_stacks((c, c.ranks) for c in groups.stacks.values()).odd)
    out.judged += len(groups.stacks)
    for hist in groups.comms.values():  # a position shorter than its communicator's tallest (`minorities`)
        odd.extend(minorities(hist))
        out.judged += len(hist)
    odd.extend(_recorder_sinks(groups, out))
    odd.extend(_p2p_waits(groups, out))
    odd.extend(_unanswered_sends(groups))
    for f in groups.host_findings:
        out.judged += 1
        if f.rank is not None:
            odd.append([f.rank, f.rank])
        if f.host is not None:
            out.hosts.add(f.host)
    out.ranks = joined(odd)
    out.processes = set(groups.unranked)
    for failed, why in ((groups.lossy, "items beyond the merged digest's caps"),
                        (groups.without_digest, f"{len(groups.without_digest)} host(s) without a usable digest"),
                        (len(groups.unranked) > MAX_UNRANKED, f"{len(groups.unranked)} processes of unknown rank"),
                        (len(out.ranks) >= MAX_RANGES, "the odd ones out are too scattered for a rank set")):
        if failed:
            return _incomplete(out, why)
    return out


def _incomplete(out: ClassJudgement, why: str) -> ClassJudgement:
    out.complete, out.why_not = False, why
    return out


def _recorder_sinks(merged: RankGroups, out: ClassJudgement) -> Intervals:
    """Where the recorder's waits end, per communicator (`wait_ends`, the recorder judge's rule: waited on, waiting
    on none), as job ranks through the members' runs; and, while such an end left no recorder state (a silent
    member: which job rank it is only its own state would say), every rank without recorder state.

    Why over comm ranks, not every rank with state: ranks with recorder state that wait on none are odd only where
    the waits end, as the judge names them. Counted as 'possibly waited on' one by one, every healthy rank of a
    fleet beside a few waiting ranks was odd (1,030 of 1,032 in a replicated issue26/slow5), each copy of one class
    read raw and the focus read every host."""
    ends: Intervals = []
    silent = False
    for comm, keys in merged.waits.items():
        out.judged += len(keys)
        runs = merged.members.get(comm, [])
        waiting, waited = comm_waits(runs, keys)
        waits = joined([p for iv in waiting.values() for p in iv])
        ends.extend(job_ranks(runs, wait_ends(waited, waits)))
        silent = silent or bool(silent_members(waited, waits, joined([[lo, hi] for lo, hi, _ in runs])))
    if not any(merged.waits.values()):
        return []
    out.judged += 1
    return [*ends, *(difference(merged.summarised, merged.recorder_ranks) if silent else [])]


def _unanswered_sends(groups: RankGroups) -> Intervals:
    """The senders the unanswered-send rule names (`unanswered`, the p2p judge's rule over the classes' rows: no
    rank in a receive, the rest in one collective), each read: the judge names every one of them. The stack
    classes it reads are counted as judged once, by the stack-class rule."""
    found = unanswered([(c.kind, c.op, c.ranks) for c in groups.stacks.values()], groups.ranks)
    return found[0] if found else []


def _p2p_waits(groups: RankGroups, out: ClassJudgement) -> Intervals:
    """Both ends of each wait the stack-peer matching draws (`judge_stacks`, over the ops `stack_op` makes of the
    classes' blocking sends and recvs: the rules the p2p judge reads the ranks by)."""
    out.judged += len(groups.p2p)
    ops = {r: op for r, call in p2p_calls(groups.p2p, MAX_RANKS) if (op := stack_op(r, call, None)) is not None}
    edges, _ = judge_stacks(ops) if ops else ([], [])
    return joined([r, r] for e in edges for r in (e.waiter, e.peer))
