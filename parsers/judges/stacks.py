"""Names suspect ranks from process state, stacks and absence, with evidence and confidence.

The rules, strongest first: a stopped process cannot take part in anything; a rank
with no process has crashed or exited; a rank stuck in the kernel (state D) is not
in user code; a rank outside every collective while its peers wait in one is the
one they wait for; a rank waiting in a different collective than its peers
mismatches. Ranks that merely wait are victims, named in the summary.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING, AbstractSet, Any, Protocol

from parsers.model.events import describe_status
from parsers.judges.own_state import STACK_KINDS, data_wait, file_of
from parsers.model.stacks import is_p2p
from parsers.model.manifest import RankRecord
from parsers.model.findings import Findings, JudgeContext, RankNote, ReasonClass, Suspect, cite
from parsers.model.majority import ahead_confidence, minority_ahead, tallest
from parsers.model.ranges import fold
from parsers.model.ranksets import Intervals, count, fold as fold_set, holds, joined, of_ranks, ranks_of
from parsers.model.states import state_rule
from parsers.readers.launcher import RankExit
from parsers.stacks.classify import WAITING_KINDS, Activity, p2p_call
from parsers.judges.claims import absent_by_job, surplus
from parsers.stacks.tree import build_tree

if TYPE_CHECKING:  # annotations: the merge of digests (parsers.scale.merge) imports this module and reads no file
    from parsers.gather.evidence import Evidence, RankEvidence



def judge(ev: Evidence, ctx: JudgeContext | None = None) -> Findings:
    """The stacks judge (the one protocol): suspects from stacks, process state and absence (logs are
    correlated elsewhere), the waiting ranks and stack classes as sections, the main-thread stack tree."""
    activities = {r.rank: r.activity for r in ev.ranks if r.rank is not None}
    waiting = {rank: act for rank, act in activities.items() if act.waiting}
    groups = _by_activity(activities.items())
    compared = Compared(compare_stacks((act, of_ranks(ranks)) for act, ranks in groups))
    suspects: list[Suspect] = []
    for r in ev.ranks:
        suspect = _judge_rank(r, activities.get(r.rank) if r.rank is not None else None, waiting, compared)
        if suspect:
            suspects.append(suspect)
    suspects += _went_ahead(ev, activities, compared)
    suspects += _missing_suspects(ev)
    suspects += _absent_suspects(ev)
    suspects.sort(key=Suspect.sort_key)
    found = Findings("stacks", suspects, judge="stacks")
    if waiting and compared.common:
        wait_kinds = wait_groups(waiting)
        found.sections["waiting"] = {"ranks": sorted(waiting), "activity": words_of_waits(wait_kinds),
                                     "groups": wait_kinds}
    found.missing = [RankNote(r.rank, r.record.host, r.record.pid, p) for r in ev.ranks for p in r.problems]
    found.missing += ev.problems
    found.sections["classes"] = class_rows((act, of_ranks(ranks)) for act, ranks in groups)
    stacks = {r.rank: r.main_stack for r in ev.ranks if r.rank is not None and r.main_stack}
    found.stack_tree = build_tree(stacks)
    found.sections["stack_tree"] = found.stack_tree.to_dict()
    return found


@dataclass(frozen=True)
class StackComparison:
    """What comparing the main threads' classes says (`compare_stacks`): each a rank set."""

    common: ClassView | None  #: the majority's wait: the largest class of waiting ranks (None: nobody waits)
    ahead: Intervals  #: went ahead: a minority waiting in one collective while every other rank runs at one place
    behind: Intervals  #: under `ahead`, the ranks that run at that one place (they agree with each other)
    outside: Intervals  #: in no collective while others wait (never joined, where the wait is the set-up's)
    mismatched: Intervals  #: waiting in another call than the majority's (not a send/recv, not two set-up calls)
    unseen: Intervals  #: no stack to compare, fewer than the ranks with one (no comparison places them)

    @property
    def odd(self) -> Intervals:
        """Every rank the comparison sets apart: the ranks whose files the judges need read."""
        return joined([*self.ahead, *self.outside, *self.mismatched, *self.unseen])


def compare_stacks(classes: Iterable[tuple[ClassView, Intervals]]) -> StackComparison:
    """The stack-class rule, stated once over classes of ranks (what their main threads do, and their rank set): a
    rank of one plain read is a class of its own activity's ranks, a merged digest's `StackClass` a class of any
    size, so the stacks judge (which names these ranks, each with its reason) and the scale path (which reads their
    raw files, `parsers.scale.classes`) decide alike at 8 ranks and at 100,000.

    The majority's wait is the largest class of waiting ranks (ties: the class of the lowest rank). A rank outside
    every collective while others wait is what they wait for; a rank that waits in another call mismatches. The odd
    one out (issue 26 item 2.5): where a minority waits in one collective and every other rank runs at one and the
    same place, the minority went ahead (it called what the others did not reach, or they skip what it calls), and
    the majority's 'in no collective' is no claim (they agree with each other). A send or receive waits for its one
    peer, not for the group to reach it: it neither went ahead nor mismatches (the p2p judges pair it by peer, and
    the class judgement reads the ends of its waits by their rule). Ranks with no stack are `unseen`: set apart
    while fewer than those with one."""
    groups = [(v, iv) for v, iv in classes if iv]
    waits = [(v, iv) for v, iv in groups if v.kind in WAITING_KINDS]
    runs = [(v, iv) for v, iv in groups if v.kind == "elsewhere"]
    unknown = joined([p for v, iv in groups if v.kind not in WAITING_KINDS and v.kind != "elsewhere" for p in iv])
    seen = sum(count(iv) for _, iv in [*waits, *runs])
    unseen = unknown if count(unknown) < seen else []
    if not waits:
        return StackComparison(None, [], [], [], [], unseen)
    tied = tallest({i: count(iv) for i, (_, iv) in enumerate(waits)})  # of a tie, the class of the lowest rank
    common = waits[min(tied, key=lambda i: waits[i][1][0][0])][0]
    running = joined([p for _, iv in runs for p in iv])
    if (not is_p2p((common.op or "").lower()) and not unknown
            and minority_ahead(dict(enumerate(iv for _, iv in waits)), dict(enumerate(iv for _, iv in runs)))):
        return StackComparison(common, waits[0][1], running, running if _in_setup(common.op) else [], [], [])
    other = [(v, iv) for v, iv in waits if v.op != common.op and not (_in_setup(v.op) and _in_setup(common.op))]
    mismatched = joined([p for v, iv in other if not (is_p2p((v.op or "").lower()) or is_p2p((common.op or "").lower()))
                         for p in iv])
    return StackComparison(common, [], [], running, mismatched, unseen)


class Compared:
    """A `StackComparison` as the judge asks it, rank by rank (rank sets as sets: a rank's membership in O(1))."""

    def __init__(self, cmp: StackComparison) -> None:
        v = cmp.common
        self.cmp = cmp
        self.common = None if v is None else Activity(v.kind or "unknown", v.op, v.where)
        self.outside, self.mismatched = set(ranks_of(cmp.outside)), set(ranks_of(cmp.mismatched))


def _went_ahead(ev: Evidence, activities: dict[int, Activity], compared: Compared) -> list[Suspect]:
    """The ranks that went ahead (`compare_stacks`), each a suspect with the place every other rank runs at."""
    cmp, common = compared.cmp, compared.common
    if not cmp.ahead or common is None:
        return []
    behind = list(ranks_of(cmp.behind))
    where = activities[behind[0]].where
    out = []
    for r in (r for r in ev.ranks if holds(r.rank, cmp.ahead)):
        rec = r.record
        ahead = cite(f"main threads: rank {rec.rank}: {common.text}; ranks {fold(behind)} all run at {where}",
                     tool=r.main_stack.source if r.main_stack else "stacks")
        out.append(Suspect(rank=rec.rank, host=rec.host, pid=rec.pid, reason_class=ReasonClass.WENT_AHEAD,
                           reason=f"went ahead: it waits in {common.op}, which ranks {fold(behind)} did not reach "
                                  f"(they all run at {where}): it calls what they skip, or skips what they do",
                           confidence=ahead_confidence(cmp.ahead, cmp.behind), evidence=[ahead]))
    return out


#: the kinds of wait said one by one in the waiting ranks' words; the rest are counted
WAIT_KINDS_SAID = 3


def waiting_text(waiting: dict[int, Activity]) -> str:
    """What the waiting ranks do, in words that hold for every one of them: 'wait in all_reduce' where all wait
    alike, else each kind with its ranks ('wait in send (ranks 0-1), recv (ranks 2-3)').

    Why: a pipeline whose stages wait, some in send and some in recv, was said as 'ranks 0-3 wait in send' (the
    most common kind standing for all), which is false for half of them."""
    return words_of_waits(wait_groups(waiting))


def wait_groups(waiting: dict[int, Activity]) -> list[dict]:
    """The waiting ranks grouped by the words said of them (two places in one call are one wait), the largest
    group first: [{'text': ..., 'ranks': [...]}]; where every one waits in a collective, the words are its name."""
    collective = all(act.kind == "collective" for act in waiting.values())
    groups: dict[str, list[int]] = {}
    for rank, act in sorted(waiting.items()):
        groups.setdefault((act.op or act.text) if collective else act.text, []).append(rank)
    ordered = sorted(groups.items(), key=lambda kv: -len(kv[1]))
    return [{"text": text, "ranks": ranks, "collective": collective} for text, ranks in ordered]


def words_of_waits(groups: list[dict], leave_out: AbstractSet[int] = frozenset()) -> str:
    """wait_groups' groups in words, without the ranks in `leave_out` (the report leaves the culprit out)."""
    kinds = [(g["text"], ranks) for g in groups if (ranks := [r for r in g["ranks"] if r not in leave_out])]
    if not kinds:
        return ""
    collective = bool(groups[0]["collective"])
    lead = "wait in " if collective else ""
    if len(kinds) == 1:
        return lead + kinds[0][0]
    said = kinds[:WAIT_KINDS_SAID]
    parts = [f"{text} (ranks {fold(ranks)})" for text, ranks in said]
    rest = sum(len(ranks) for _, ranks in kinds[WAIT_KINDS_SAID:])
    more = f", {rest} more in {len(kinds) - WAIT_KINDS_SAID} other kind(s) of wait" if rest else ""
    return lead + ", ".join(parts) + more


def _where(r: RankEvidence) -> str:
    act = r.activity
    return act.where or "an unknown place (no stack)"


class _Evidence(list[str]):
    """A rank's evidence lines, built only when a suspect is made (folding the waiting ranks costs O(world))."""

    def __init__(self, r: RankEvidence, waiting: dict[int, Activity], common: Activity | None) -> None:
        super().__init__()
        self.r, self.waiting, self.common = r, waiting, common
        self.others = len(waiting) - (r.rank in waiting) > 0
        self._filled = False

    def others_text(self) -> str:
        return fold(k for k in self.waiting if k != self.r.rank)

    def fill(self) -> "_Evidence":
        if not self._filled:
            self._filled = True
            r = self.r
            wchan = r.proc.get("wchan") if r.proc else None
            head = [cite(f"process state {r.state}" + (f", wchan {wchan}" if wchan else ""), tool="/proc",
                         file=file_of(r, "process-state"))]
            if r.main_stack:
                head.append(cite(f"{r.main_stack.source}: main thread at {_where(r)}", tool="stack-frame",
                                 file=file_of(r, *STACK_KINDS)))
            if self.others and self.common:
                head.append(cite(f"ranks {self.others_text()} {self.common.text}", tool="stacks"))
            self[:0] = head
        return self


def _exited_reason(r: RankEvidence) -> str:
    """How it ended, from the wait status /proc keeps for a zombie, where the collector saw one."""
    if r.state == "Z":
        ended = r.proc.ended if r.proc is not None and r.proc.gone else describe_status(None)
        return f"has exited ({ended}; a zombie: its parent has not reaped it) while the job runs on"
    return "has exited (zombie or gone) while the job runs on"


def _how_found(rec: Any) -> list[str]:
    """Lines that say how an exited rank was found and its rank learned (it has no environment left)."""
    lines = list(getattr(rec, "job_evidence", None) or [])[:3]
    return [cite(f"collector: {line}", tool="collector") for line in lines]


def _suspect(rec: RankRecord, rc: ReasonClass, reason: str, evidence: list[str],
             confidence: float | None = None) -> Suspect:
    """A suspect for the process of `rec`, as sure as its class says unless `confidence` says otherwise."""
    return Suspect(rank=rec.rank, host=rec.host, pid=rec.pid, reason_class=rc, reason=reason,
                   confidence=rc.default_confidence if confidence is None else confidence, evidence=evidence)


def _judge_rank(r: RankEvidence, act: Activity | None, waiting: dict[int, Activity],
                compared: Compared) -> Suspect | None:
    state = r.state
    rec = r.record
    common = compared.common
    evidence = _Evidence(r, waiting, common)
    others = evidence.others
    alone = state_rule(r)  # what its state says by itself (the scale path flags the same ranks 'frozen')
    if alone == "stopped":
        reason = (f"is stopped (state {state}: SIGSTOP or a debugger) and cannot take part in any collective; "
                  f"its main thread is at {_where(r)}")
        return _suspect(rec, ReasonClass.STOPPED, reason, list(evidence.fill()))
    if alone == "gone" or (r.from_manifest and rec.state_before is None and r.proc is None):
        return _suspect(rec, ReasonClass.EXITED, _exited_reason(r), list(evidence.fill()) + _how_found(rec))
    if alone == "kernel":
        reason = f"is stuck in the kernel (state D, wchan {r.proc.get('wchan') if r.proc else None})"
        return _suspect(rec, ReasonClass.KERNEL_WAIT, reason, list(evidence.fill()))
    if state == "R":
        evidence.append(cite("busy on a CPU (state R) at collection", tool="/proc", file=file_of(r, "process-state")))
    loader = data_wait(r)
    if loader is not None:
        reason, more = loader
        conf = ReasonClass.DATA_WAIT.default_confidence if others else 0.5
        return _suspect(rec, ReasonClass.DATA_WAIT, reason, list(evidence.fill()) + more, conf)
    if act is None or not others or common is None:
        return None
    # who is set apart is the stack-class rule's (`compare_stacks`); the reason, and a send/recv frame below the
    # top (the p2p judge matches it), are this rank's own
    if r.rank in compared.outside and _in_setup(common.op):
        reason = (f"has not joined the rendezvous: its main thread runs {act.where} while ranks "
                  f"{evidence.others_text()} wait in {common.op}")
        return _suspect(rec, ReasonClass.NEVER_JOINED, reason, list(evidence.fill()))
    if r.rank in compared.outside:
        reason = f"is in no collective: its main thread runs {act.where}"
        return _suspect(rec, ReasonClass.OUTSIDE, reason, list(evidence.fill()))
    if r.rank in compared.mismatched and p2p_call(r.main_stack, act) is None:
        reason = f"waits in {act.op} while its peers wait in {common.op}"
        return _suspect(rec, ReasonClass.MISMATCH, reason, list(evidence.fill()))
    return None


#: collectives of process-group set-up: a rank elsewhere while the others wait in one never joined
INIT_OPS = ("init_process_group", "new_group", "_store_based_barrier", "rendezvous", "barrier_after_init",
            "c10d::TCPStore", "c10d::detail::SocketImpl::waitForInput", "TCPStore::waitForWorkers",
            "_create_c10d_store")


def _in_setup(op: str | None) -> bool:
    """The store master and its clients wait in different calls of one rendezvous: no mismatch."""
    return any(m in (op or "") for m in INIT_OPS)


def _missing_suspects(ev: Evidence) -> list[Suspect]:
    exits = {e.rank: e for e in ev.exits}
    launcher = next((a.cite for a in ev.artifacts if a.kind == "launcher"), None)
    suspects = []
    for miss in ev.missing:
        evidence: list[str] = [cite(miss.reason, tool="manifest")]
        exit_rec = exits.get(miss.rank)
        reason = "has no process: it crashed or exited"
        if exit_rec and exit_rec.returncode is not None:
            reason = f"has no process: it {exit_rec.how}"
            evidence.append(cite(f"launcher: pid {exit_rec.pid} {exit_rec.how}", tool="launcher record", file=launcher))
        suspects.append(Suspect(rank=miss.rank, host=miss.host, pid=exit_rec.pid if exit_rec else None,
                                reason_class=ReasonClass.MISSING, reason=reason,
                                confidence=ReasonClass.MISSING.default_confidence, evidence=evidence))
    known = {m.rank for m in ev.missing} | {r.rank for r in ev.ranks}
    first = _first_failure([e for e in ev.exits if e.rank not in known])
    if first:
        later = sorted(e.rank for e in ev.exits if e.exited_at and e is not first)
        suspects.append(
            Suspect(
                rank=first.rank, host=first.host, pid=first.pid, reason_class=ReasonClass.EXITED_FIRST,
                reason=f"was the first rank to die: it {first.how}",
                confidence=ReasonClass.EXITED_FIRST.default_confidence,
                evidence=[cite(f"launcher: ranks {fold(later)} died after it", tool="launcher record", file=launcher)]
                if later else [],
            )
        )
    return suspects


def _absent_suspects(ev: Evidence) -> list[Suspect]:
    """Ranks below WORLD_SIZE found on no collected host, when only a few are absent.

    A bundle of every host of a job that lacks rank 7 says rank 7 died or never
    started. A bundle of one host of many lacks most ranks and says nothing, so
    absence counts only when it is rare (at most one rank in sixteen, at least one).
    """
    suspects = []
    hosts = sorted({r.record.host for r in ev.ranks})
    for job, (world, ranks, absent) in absent_by_job(ev).items():
        if not absent or surplus(ranks) >= len(absent):
            continue  # none, or each may be a process that claims a rank twice (an observation says which)
        for rank in absent:
            reason = f"has no process on any collected host ({len(ranks)} of {world} ranks of the job were found)"
            evidence: list[str] = [cite(f"job {job}: WORLD_SIZE={world}; hosts collected: {', '.join(hosts)}",
                                        tool="manifest")]
            suspects.append(Suspect(rank=rank, host=None, pid=None, reason_class=ReasonClass.ABSENT, reason=reason,
                                    confidence=ReasonClass.ABSENT.default_confidence, evidence=evidence))
    return suspects


def _first_failure(exits: list[RankExit]) -> RankExit | None:
    failed = [(e.exited_at, e) for e in exits if e.returncode not in (None, 0) and e.exited_at is not None]
    return min(failed, key=lambda f: f[0])[1] if failed else None


def _by_activity(activities: Iterable[tuple[int, Activity]]) -> list[tuple[Activity, list[int]]]:
    """The ranks grouped by what their main thread does, the largest group first (ties in the order given)."""
    groups: dict[Activity, list[int]] = {}
    for rank, act in activities:
        groups.setdefault(act, []).append(rank)
    return sorted(groups.items(), key=lambda kv: -len(kv[1]))


class ClassView(Protocol):
    """What a row of the classes section reads of a class: what its main threads do. An `Activity` (the ranks
    of one plain read grouped by it) and a merged digest's `StackClass` (ranks of the whole job) both satisfy it."""

    @property
    def kind(self) -> str | None: ...

    @property
    def op(self) -> str | None: ...

    @property
    def where(self) -> str | None: ...


def class_rows(groups: Iterable[tuple[ClassView, Intervals]]) -> list[dict]:
    """The classes section: a row per class of ranks (what its main threads do, its ranks folded, how many),
    the largest first, ties in the order given. The one statement of it: the judge's over the ranks it read,
    the focus's (`parsers.scale.focus.Focus.classes`) over every rank the digests summarised."""
    rows = [{"activity": Activity(v.kind or "unknown", v.op, v.where).text, "ranks": fold_set(iv), "count": count(iv)}
            for v, iv in groups]
    return sorted(rows, key=lambda row: -row["count"])
