"""Who is silent among the ranks of the default group a set of lines names: said, never weighed.

Why: ranks are numbered from 0, so a rank below the highest one that times out is in the job,
and in an excerpt where several ranks time out, the ranks below them that print nothing are
worth saying (the one doing extra work on its own, evaluation or saving on rank 0, is
typically among them: Ultra-Fast-Lane-Detection-v2 #119, ranks 1-3 time out after
'Evaluating the results...'). Why never weighed: an excerpt is whatever the user copied, so
a rank missing from it may simply not have been pasted; the sentence says 'here'.
"""

from __future__ import annotations

from parsers.gather.evidence import Coverage, Evidence
from parsers.model.events import TIMEOUT_KINDS, CommMember, ErrorEvent
from parsers.model.findings import CoverageFact

#: the default process group's key as the readers write it
DEFAULT_PG = "pg:0"
#: a rank number above this is no rank of a job these lines could come from (a hostile or garbled line)
MAX_RANK = 1_000_000
#: silent ranks listed at most (folded into ranges)
MAX_LISTED = 10_000


def silent_below(ev: Evidence) -> tuple[list[int], int] | None:
    """(the ranks below the highest waiting rank of the default group that no line names, that rank), where
    at least two ranks of the group wait (one waiting rank alone is an excerpt of one rank); else None."""
    failed_at, named = _read(ev)
    if any(len(seqs) > 1 for seqs in failed_at.values()):
        return None
    waiting = set(failed_at)
    if len(waiting) < 2:
        return None
    top = max(waiting)
    silent: list[int] = []
    for r in range(top):  # bounded: top <= MAX_RANK, and the list stops at MAX_LISTED
        if r not in named:
            silent.append(r)
            if len(silent) >= MAX_LISTED:
                break
    return (silent, top) if silent else None


def _read(ev: Evidence) -> tuple[dict[int, set[int]], set[int]]:
    """Per global rank, the SeqNums it failed at in the default group; every global rank any line names.

    Why the SeqNums: the watchdog takes a process down at its first timed-out collective, so one
    rank failing at several SeqNums means the lines come from several groups that carry no PG tag
    (torch 1.x lines are all keyed to the default group; seen: PyTorch #118369, rank 0 at
    96117-96125 and rank 7 at 64088, and Megatron #1142): their '[Rank N]' numbers may then be
    ranks in subgroups, not in the job, and nothing is said."""
    failed_at: dict[int, set[int]] = {}
    named: set[int] = set()
    for art in ev.artifacts:
        if not art.parsed:
            continue
        for e in art.parsed.events:
            rank = getattr(getattr(e, "origin", None), "rank", None)
            if not isinstance(rank, int) or not 0 <= rank <= MAX_RANK:
                continue
            named.add(rank)
            if type(e) is ErrorEvent and e.kind in TIMEOUT_KINDS and e.seq is not None and \
                    (e.comm or DEFAULT_PG) == DEFAULT_PG:
                seqs = failed_at.setdefault(rank, set())
                if len(seqs) < 2:  # two are enough to call the lines mixed
                    seqs.add(e.seq)
    return failed_at, named


def unnamed_members(ev: Evidence, world: int) -> set[int]:
    """Communicator ranks of an NCCL communicator as big as the job (`comm .. rank r nranks W .. Init COMPLETE`)
    whose lines name no global rank. Why: such a file holds lines from those processes, so 'no line from rank r'
    is not true of them, though which global rank each is the lines do not say (DeepSpeed #2931: ranks 0, 3 and 6
    of 16 finish init; NVIDIA/nccl#733)."""
    seen: set[int] = set()
    for art in ev.artifacts:
        for e in art.parsed.events if art.parsed else ():
            if type(e) is CommMember and e.nranks == world and e.comm_rank is not None and e.origin.rank is None:
                seen.add(e.comm_rank)
                if len(seen) >= MAX_LISTED:
                    return seen
    return seen


def absent_fact(ev: Evidence, cov: Coverage) -> CoverageFact:
    """What a job of known size with ranks not heard from looks like in these files, never saying 'no line from
    rank r' of a process whose lines are here under its communicator rank only (forensics/report/words/facts.py
    words it)."""
    unnamed = unnamed_members(ev, cov.world_size) if not cov.reporting and cov.world_size else set()
    if unnamed:
        return CoverageFact("unnamed", tuple(sorted(unnamed)), cov.world_size)
    return CoverageFact("absent", world=cov.world_size, absent=len(cov.absent), first=cov.absent[0])
