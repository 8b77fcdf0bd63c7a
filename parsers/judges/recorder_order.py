"""An order mismatch read from the recorder's rings: the rank that called another collective at the position
where the others wait.

Why: one rank calls `broadcast` where the others call `all_reduce` (issue 39). NCCL may abort the others
("message truncated"), while the odd rank finishes its own call and exits 0. Its live state file is gone, but the
copy the recorder leaves beside the NCCL logs at a clean finalize keeps its ring of operations: what it called at
each position. Comparing the ranks' rings position by position names it with evidence of its own, instead of
"exited" or "never entered AllReduce seq 5".

A position is a collective's ordinal in its communicator, counted from 1. The ring numbers every operation,
collectives and point-to-point alike (`CollRecord.index`), and NCCL's own seqNumber counts per function, so it
cannot line up a broadcast against an all-reduce; the ordinal is the record number less the point-to-point
records before it, which is known only while the ring still holds the communicator's first record (or when it
never had a point-to-point op). A rank whose position cannot be known is left out, never guessed.
"""

from __future__ import annotations

from collections import Counter

from parsers.model import Suspect
from parsers.model.events import normalise_op
from parsers.model.findings import ReasonClass, cite, of_rank
from parsers.model.majority import OddSide, odd_sides, tallest
from parsers.readers.recorder import CollRecord, RecorderState

Signature = tuple[str, int, str]


def ordinals(st: RecorderState) -> dict[int, CollRecord] | None:
    """1-based collective position -> the rank's record there; None where the ring no longer places them."""
    records = sorted((c for c in st.colls if c.consistent), key=lambda c: c.index)
    if not records:
        return {}
    if st.p2p_next and records[0].index != 0:
        return None  # p2p ops were overwritten: how many came before is not known
    out: dict[int, CollRecord] = {}
    p2p = 0
    for rec in records:
        if rec.kind == "coll":
            out[rec.index - p2p + 1] = rec
        else:
            p2p += 1
    return out


def signature(rec: CollRecord) -> Signature:
    """('allreduce', 16384, 'float32'): what a position's call must agree on across ranks."""
    dtype = rec.dtype.lower().removeprefix("nccl")
    return normalise_op(rec.func) or rec.func, rec.count, dtype


def label(sig: Signature) -> str:
    return f"{sig[0]}(count={sig[1]}, {sig[2]})"


def _waiting_position(placed: dict[int, dict[int, CollRecord]]) -> int | None:
    """The position most ranks wait in: each rank's first collective not complete (`tallest`; of a tie, the first
    seen)."""
    firsts = Counter(min(k for k, rec in recs.items() if rec.state != "complete")
                     for recs in placed.values() if any(rec.state != "complete" for rec in recs.values()))
    return next(iter(tallest(firsts)), None)


def order_mismatch(comm: str, states: list[RecorderState]) -> list[Suspect]:
    """The odd sides of the first position where calls differ, up to the position most ranks wait in, by the rule the
    logs judge shares (`odd_sides`): a minority the others outnumber is named, surer when the ranks not seen at that
    position could not tip the count; where the largest sides tie, or the others do not outnumber the odd ones,
    every side is a lead (no majority says which call was wrong), never a culprit.

    Why not only that position: on the device (NCCL 2.28.9, seed 41) the others' all_reduce at the culprit's
    broadcast completed (with the wrong data), and they hung in the next all_reduce, which the culprit also
    finished."""
    by_rank = {st.rank: st for st in states}
    placed = {r: recs for r, st in by_rank.items() if (recs := ordinals(st)) is not None}
    wait = _waiting_position(placed)
    if wait is None:
        return []
    nranks = max(st.nranks for st in states)
    for pos in sorted({k for recs in placed.values() for k in recs if k <= wait}):
        sigs = {r: signature(recs[pos]) for r, recs in placed.items() if pos in recs}
        sides = odd_sides(sigs, max(0, nranks - len(sigs)) if nranks > 0 else None)
        if sides:
            return [_suspect(by_rank[r], comm, (pos, wait), side) for side in sides for r in side.ranks]
    return []


def _suspect(st: RecorderState, comm: str, at: tuple[int, int], side: OddSide[Signature]) -> Suspect:
    """`at`: (the position of the difference, the one most ranks wait in); `side`: this rank's side there, and the
    call it is compared with (the majority's, or in a tie another tied side's)."""
    rank, (pos, wait), called, major, n_major = st.job_rank, at, side.called, side.reference, side.n_reference
    done = ("; it finished that call and finalized cleanly (its recorder copy at finalize)" if st.finalize_copy
            else "")
    later = f"; the others wait in collective #{wait}" if wait != pos else ""
    tie = "; as many ranks called that, so no call is the majority" if side.tie else ""
    where, many = f"collective #{pos} of communicator {comm}", f"{n_major} rank{'' if n_major == 1 else 's'}"
    return Suspect(rank=rank, host=st.hostid or st.host, pid=st.pid, reason_class=ReasonClass.MISMATCH,
                   reason=of_rank(rank, f"called {label(called)} at {where} where {many} called "
                                        f"{label(major)}{tie}{later}{done}"),
                   confidence=side.confidence,
                   evidence=[cite(f"{where}: comm rank {st.rank} recorded {label(called)}, {many} "
                                  f"{label(major)}", tool="recorder")])
