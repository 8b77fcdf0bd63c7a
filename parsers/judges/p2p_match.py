"""Point-to-point matching: each rank's sends and receives paired with its peers', per pair and direction.

Why matching, not comparing: a send from A to B and a receive at B from A pair up in the order each side
posts them (the n-th send A posts to B is the n-th receive B posts from A; NCCL and gloo both keep that
order per pair). PyTorch's p2p sequence number counts a rank's own point-to-point ops in a group, every peer
together, so two ranks' numbers say nothing of each other: a send at p2p seq 12 and a receive at p2p seq 6
of one pair can be the same transfer. What tells whether a rank waits on its peer is whether the peer ever
posted the op that pairs with its own: counted per (sender, receiver), not read from the numbers.

A pending op (not completed) is then:
- 'matched': the peer posted the pairing op; the rank does not wait for the peer to post anything;
- 'unmatched': the peer posted fewer pairing ops than this one's place (it is behind, or never comes);
- 'unknown': the peer left no history, or one of the two histories does not reach back to its first op
  (a ring buffer that wrapped): no count can be trusted, and nothing is claimed from it.
"""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass, field

from parsers.model.events import Origin

#: normalised Flight Recorder names: 'nccl:send 0->1' -> 'send0->1', 'nccl:recv 1<-0' -> 'recv1<-0'
_NAMED = re.compile(r"^(send|recv)(\d+)(->|<-)(\d+)$")
#: most pending ops of one rank weighed (a rank blocks in a few; a hostile dump could list thousands)
MAX_PENDING = 64


@dataclass(frozen=True)
class P2POp:
    """One send or receive a rank posted: to or from `peer`, its `nth` such op to that peer (from 1)."""

    rank: int
    kind: str  #: 'send' or 'recv'
    peer: int
    seq: int  #: the rank's own p2p sequence number (its count of p2p ops in the group, every peer together)
    state: str
    nth: int
    origin: Origin | None = field(default=None, compare=False)  #: the event's (file, line), for citations

    @property
    def pairing(self) -> str:
        """The kind of op the peer posts to pair with this one."""
        return "recv" if self.kind == "send" else "send"


@dataclass
class History:
    """One rank's point-to-point ops in posting order; `complete` when it reaches back to its first one."""

    rank: int
    ops: list[P2POp] = field(default_factory=list)
    complete: bool = False
    counts: Counter = field(default_factory=Counter)  #: (kind, peer) -> ops posted

    def posted(self, kind: str, peer: int) -> int:
        return self.counts[(kind, peer)]

    def pending(self) -> list[P2POp]:
        """The ops after its last completed one: what it still waits in (an older op left 'scheduled' by a
        dump without completion times is not counted once a later one completed)."""
        done = max((i for i, op in enumerate(self.ops) if op.state == "completed"), default=-1)
        return self.ops[done + 1:][:MAX_PENDING]

    def receives(self) -> list[P2POp]:
        """Its receives, newest last: a receive cannot complete before its send is posted, so one its peer never
        answered waits whatever its state says (seen, NCCL 2.28.9, torch 2.11: the watchdog's dump after the
        timeout says 'completed' for the receive that waited on a peer which never sent)."""
        return [op for op in self.ops if op.kind == "recv"][-MAX_PENDING:]

    def sends(self) -> list[P2POp]:
        """Its sends, newest last: a completed one its peer never receives at all is the send side of a wrong peer
        (NCCL completes a send whose data fits the peer's buffers before any receive is posted)."""
        return [op for op in self.ops if op.kind == "send"][-MAX_PENDING:]


@dataclass(frozen=True)
class Pending:
    """A pending op and what its peer's history says of it."""

    op: P2POp
    match: str  #: 'matched', 'unmatched', 'queued' (matched, its answer queued behind the peer's own op) or 'unknown'
    peer_posted: int | None  #: how many pairing ops the peer posted to this rank (None: unknown)
    behind: "P2POp | None" = None  #: 'queued': the peer's earlier pending op its answer waits behind

    @property
    def never(self) -> bool:
        """The peer, over its whole history, posted no op that pairs with any of this rank's of this kind."""
        return self.match == "unmatched" and self.peer_posted == 0


def parse_name(op: str) -> tuple[str, int, int] | None:
    """('send', own rank, peer) from a normalised Flight Recorder name, or None."""
    m = _NAMED.match(op or "")
    return (m.group(1), int(m.group(2)), int(m.group(4))) if m else None


def histories(ops_by_rank: dict[int, list[tuple[int, str, int, str, Origin | None]]],
              whole: set[int]) -> dict[int, History]:
    """Each rank's History from its (p2p seq, kind, peer, state, origin) records (any order; one record per
    seq and kind and peer, the latest state kept). `whole`: ranks whose dump lost nothing (it holds the
    recorder's first record), complete even with no p2p op at all (a rank that never sends to a peer).
    Otherwise complete when the lowest seq is 1: PyTorch numbers a group's p2p ops from 1, and a ring buffer
    that wrapped has lost the first."""
    out = {}
    for rank in set(ops_by_rank) | set(whole):
        records = ops_by_rank.get(rank, ())
        latest: dict[tuple[int, str, int], tuple[str, Origin | None]] = {}
        for seq, kind, peer, state, origin in records:
            key = (seq, kind, peer)
            if key not in latest or latest[key][0] != "completed":
                latest[key] = (state, origin)
        h = History(rank, complete=rank in whole or (bool(latest) and min(k[0] for k in latest) <= 1))
        for seq, kind, peer in sorted(latest):
            h.counts[(kind, peer)] += 1
            state, origin = latest[(seq, kind, peer)]
            h.ops.append(P2POp(rank, kind, peer, seq, state, h.counts[(kind, peer)], origin))
        out[rank] = h
    return out


def match(op: P2POp, hist: dict[int, History]) -> Pending:
    """Whether `op`'s peer posted the op that pairs with it (see the module's doc)."""
    own, peer = hist.get(op.rank), hist.get(op.peer)
    if own is None or peer is None or not (own.complete and peer.complete):
        return Pending(op, "unknown", None)
    posted = peer.posted(op.pairing, op.rank)
    return Pending(op, "matched" if posted >= op.nth else "unmatched", posted)


def queued(p: Pending, hist: dict[int, History]) -> Pending:
    """A matched pending op whose answer the peer posted behind an earlier op of its own still pending: the
    peer's ops run in posting order (one stream per communicator in NCCL, one thread in gloo), so this one waits
    on the peer's earlier op. Two ranks that each send first and then receive are matched by count and still
    wait on each other this way (seen, NCCL 2.28.9, 48-96 MB). Only where both ranks' states are tracked (some
    op completed): a dump that marks nothing completed says nothing of order."""
    if p.match != "matched":
        return p
    own, peer = hist[p.op.rank], hist[p.op.peer]
    if not (any(o.state == "completed" for o in own.ops) and any(o.state == "completed" for o in peer.ops)):
        return p
    answer = next((o for o in peer.ops if o.kind == p.op.pairing and o.peer == p.op.rank and o.nth == p.op.nth), None)
    waiting = peer.pending()
    if answer is None or answer not in waiting or waiting.index(answer) == 0:
        return p
    return Pending(p.op, "queued", p.peer_posted, waiting[0])


def pending_ops(hist: dict[int, History]) -> list[Pending]:
    """Every rank's pending ops, each matched against its peer's history, its receives that its peer never
    answered, whatever their state, and its completed sends to a peer that never receives from it at all. A
    completed send its peer has merely not answered yet is no wait: NCCL completes a send whose data fits the
    peer's buffers before the receive is posted (seen, 256K floats); one to a peer that never receives from it is
    kept, for the wrong-peer reading only (it makes no wait edge: parsers/judges/p2p.py)."""
    out = []
    for rank in sorted(hist):
        ops = dict.fromkeys(hist[rank].pending())
        ops.update(dict.fromkeys(op for op in hist[rank].receives() if op.state == "completed"))
        ops.update(dict.fromkeys(op for op in hist[rank].sends() if op.state == "completed"))
        matched = [queued(match(op, hist), hist) for op in ops]
        out += [p for p in matched
                if p.op.state != "completed" or p.match == "unmatched" and (p.op.kind == "recv" or p.never)]
    return sorted(out, key=lambda p: (p.op.rank, p.op.seq))


def unmatched_toward(rank: int, kind: str, hist: dict[int, History]) -> list[int]:
    """Ranks that posted more ops of `kind` to `rank` than `rank` posted the pairing op of: a send to it it
    never received (or a receive from it it never sent to). Complete histories only."""
    own = hist.get(rank)
    if own is None or not own.complete:
        return []
    pairing = "recv" if kind == "send" else "send"
    return sorted(q for q, h in hist.items()
                  if q != rank and h.complete and h.posted(kind, rank) > own.posted(pairing, q))


def wrong_peer(p: Pending, hist: dict[int, History]) -> list[int]:
    """The ranks whose op toward p's rank went unanswered while p's rank waits on a peer that never posts to it
    (its receive from 2 while rank 3's send to it waits): the sign that it named the wrong peer. Empty where
    the peer has merely not got there yet (no other rank's op to it goes unanswered: a stall, not a wrong peer)."""
    if not p.never:
        return []
    return [q for q in unmatched_toward(p.op.rank, p.op.pairing, hist) if q != p.op.peer]
