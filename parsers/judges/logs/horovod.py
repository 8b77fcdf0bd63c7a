"""Horovod's stall inspector, judged: the rank every stalled op waits for.

Why a judge of its own: the stall inspector (parsers.readers.horovod) is the coordinator's own
account of a Horovod hang, per tensor some ranks submitted and others did not: which ranks are
missing, or which are ready. A rank that is missing from every stalled op of every report is
the one the others wait for (horovod/horovod#1012: seven broadcasts, each `[missing ranks: 1]`).
Where several ranks are missing from every op (#457: ranks 0, 1 and 4), or the ops miss
different ranks, no one rank is named: that is a split, said as such.

A `[ready ranks: ...]` list names the missing ranks only against the job's size: with the size
stated in the files (an NCCL communicator of the whole job, WORLD_SIZE), every rank not ready is
missing; without it, only the ranks below the highest ready rank are surely in the job, and
ranks above it may be missing too (#530: ready 0,1,3,4,5,6 in a 7-worker job the lines never
size), so the absent rank is said, never named as the culprit.
"""

from __future__ import annotations

from typing import cast

from parsers.gather.evidence import Evidence
from parsers.model.ranges import listable
from parsers.model.events import ErrorEvent, ErrorKind, HorovodStall, TimelinePath
from parsers.model.findings import Findings, HorovodFact, JudgeContext, ReasonClass, Suspect, cite

#: confidence of a rank missing from every stalled op: the coordinator's own statement, but a rank can be
#: missing only because it is slower at that moment (a rank doing validation alone), so not an observed fault
CONFIDENCE = 0.75
MAX_OPS = 100_000  #: entries read per file (bounded work on hostile input)


def _entries(ev: Evidence) -> list[tuple[str, ErrorEvent]]:
    out = []
    for art in ev.artifacts:
        if not art.parsed:
            continue
        for e in art.parsed.events:
            if type(e) is ErrorEvent and e.kind == ErrorKind.HOROVOD_STALL:
                out.append((art.cite, e))
                if len(out) >= MAX_OPS:
                    return out
    return out


def missing_sets(ev: Evidence, world: int | None) -> tuple[dict[tuple, set[int]], dict[tuple, set[int]]]:
    """Per stalled op ((file, report, tensor)): the ranks missing from it, where the lines say so (a missing
    list, or a ready list against a known job size); and, for ready lists without a size, the ranks surely
    missing (below the highest ready rank)."""
    missing: dict[tuple, set[int]] = {}
    below: dict[tuple, set[int]] = {}
    for where, e in _entries(ev):
        d = cast(HorovodStall, e.data)  # ErrorEvent makes a horovod-stall event's data one
        listing = d.tensors is not None  # one `<rank>: [...]` line of a report: its ranks add up per tensor
        tensors: list[str | None] = list(d.tensors) if d.tensors else [d.tensor]
        for tensor in tensors[:MAX_OPS]:
            # a `<tensor> [missing ranks: ...]` entry is whole: the same tensor again is the next report's
            key = (where, d.report, tensor, None if listing else d.entry)
            if d.missing is not None:
                missing.setdefault(key, set()).update(d.missing)
            elif d.ready:
                ready = set(d.ready)
                if world:
                    missing.setdefault(key, set()).update(r for r in listable(world, len(ready)) if r not in ready)
                else:
                    below.setdefault(key, set()).update(r for r in range(max(ready)) if r not in ready)
    return missing, below


def _ops(sets: dict[tuple, set[int]]) -> str:
    """'3 ops' / '1 op, reported 11 times': distinct tensors, and how many entries named them."""
    tensors = len({k[2] for k in sets})
    text = f"{tensors} op{'s' if tensors > 1 else ''}"
    return text + (f", reported {len(sets)} times" if len(sets) > tensors else "")


def _world(ev: Evidence) -> int | None:
    cov = getattr(ev, "coverage", None)
    return getattr(cov, "world_size", None) or getattr(ev, "world_size", None)


def judge(ev: Evidence, ctx: JudgeContext | None = None) -> Findings:
    """Horovod's stall inspector names the rank a collective waits for, as the recorder does (read from logs)."""
    return Findings("logs", stalled(ev), judge="horovod")


def stalled(ev: Evidence) -> list[Suspect]:
    """The rank missing from every stalled op, when exactly one is (else nothing)."""
    missing, _ = missing_sets(ev, _world(ev))
    if not missing:
        return []
    common = set.intersection(*missing.values())
    if len(common) != 1:
        return []
    rank = next(iter(common))
    example = next(iter(missing))[2]
    return [Suspect(rank=rank, host=None, pid=None, reason_class=ReasonClass.MISSING_LINE,
                    reason=f"Horovod's stall inspector names it missing from every stalled op ({_ops(missing)}, "
                           f"e.g. {example}): the other ranks wait for it",
                    confidence=CONFIDENCE,
                    evidence=[cite(f"horovod stall report: {e.message[:200]} [{name}:{e.origin.line}]", tool="horovod",
                                   file=name, line=e.origin.line, tagged=True) for name, e in _entries(ev)[:3]])]


def facts(ev: Evidence) -> list[HorovodFact]:
    """What the stall reports show when they name no one rank (the ranks missing from every op, or the split),
    and Horovod's own setting errors (a timeline path that is a directory); worded by
    forensics/report/words/facts.py."""
    return _timeline(ev) + _stalls(ev)


def _timeline(ev: Evidence) -> list[HorovodFact]:
    """HOROVOD_TIMELINE names a directory (horovod/horovod#244): the setting is the cause, no rank."""
    for art in ev.artifacts:
        for e in art.parsed.events if art.parsed else ():
            if type(e) is ErrorEvent and e.kind == ErrorKind.HOROVOD_TIMELINE_ERROR:
                said = cast(TimelinePath, e.data)
                return [HorovodFact("timeline", path=said.path, directory=bool(said.directory))]
    return []


def _counted(role: str, ranks: set[int], sets: dict[tuple, set[int]]) -> HorovodFact:
    """A fact about `ranks` over the stalled ops of `sets`: distinct tensors, and how many entries named them."""
    return HorovodFact(role, tuple(sorted(ranks)), len({k[2] for k in sets}), len(sets))


def _stalls(ev: Evidence) -> list[HorovodFact]:
    world = _world(ev)
    missing, below = missing_sets(ev, world)
    if missing:
        common = set.intersection(*missing.values())
        if len(common) > 1:
            return [_counted("several", common, missing)]
        if not common:
            return [_counted("split", set().union(*missing.values()), missing)]
    elif below:
        common = set.intersection(*below.values())
        if common:
            return [_counted("left-out", common, below)]
        return [_counted("varied" if any(below.values()) else "ready", set(), below)]
    return []
