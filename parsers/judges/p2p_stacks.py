"""Point-to-point waits from stacks: each rank's blocking send or recv, its peer from the call's own arguments.

Why a snapshot matching of its own: gloo keeps no record of a send or receive, and its Flight Recorder lists
none, so a live look has only the stacks. Where py-spy --locals gave the call's `dst` or `src`
(forensics/collectors/pyspy_peers.py, kept as `Frame.args`), each rank's main thread is one op at one moment:
'send to 3', 'recv from 2'. Unlike the recorder's histories (judges/p2p_match.py) these carry no count, so what
they say is what every rank does now:
- a send and the receive that answers it (A sends to B while B receives from A) are one transfer: no wait;
- any other op waits on its peer: an edge. Where every rank on a cycle of such edges is blocked in its op, none
  of them ever posts another: the cycle is how the job stands, for good;
- a rank whose op waits on a peer that is in the pairing op toward a third rank (it receives from 2, and 2 sends
  to 3), while another rank posts toward it the op its own would pair with (rank 3 sends to it), named the wrong
  peer, where its edge lies on such a cycle. Its peer in the same kind of op as its own (it receives from 2 while
  2 itself receives) is behind, waiting upstream: no wrong peer is said of that wait;
- two ranks each in a send to the other, or each in a receive, are a deadlock of the pair (their edges close a
  cycle of two, which the arbiter names with both ranks and the op).
Without kept arguments (no --locals, a recv from any source) nothing here is claimed.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from parsers.model.findings import ReasonClass, Suspect, WaitEdge, cite, of_rank
from parsers.model.ranges import fold
from parsers.model.stacks import P2P_PEER_ARG, ThreadStack, python_frames

DEFAULT_GROUP = "pg:0"
#: ranks weighed at most (each rank holds one op; a cycle search over more would cost more than it tells)
MAX_RANKS = 65536


@dataclass(frozen=True)
class StackOp:
    """A rank's main thread inside torch.distributed's blocking `kind` ('send' or 'recv') with `peer`."""

    rank: int
    kind: str
    peer: int
    pid: int | None = None
    host: str | None = None
    file: str | None = None  #: the stack file that shows it

    @property
    def pairing(self) -> str:
        return "recv" if self.kind == "send" else "send"

    def answers(self, other: "StackOp | None") -> bool:
        """Whether `other` is the op that pairs with this one (one transfer in flight, no wait)."""
        return other is not None and other.kind == self.pairing and other.peer == self.rank

    def words(self) -> str:
        return f"{self.kind} {'to' if self.kind == 'send' else 'from'} {self.peer}"


def blocking_call(stack: ThreadStack | None) -> tuple[str, int] | None:
    """('send', dst) or ('recv', src): the main thread's blocking point-to-point call with its kept peer, or None.
    What a rank's summary keeps too (parsers.scale.digest.rank_summary), so that a rank read raw and a rank judged
    from its host's digest are one op by one rule."""
    if stack is None:
        return None
    return next((f.p2p for f in python_frames(stack) if f.p2p is not None), None)


def stack_op(rank: int | None, call: tuple[str, int] | None, world: int | None, pid: int | None = None,
             host: str | None = None, file: str | None = None) -> StackOp | None:
    """The op of a rank in `call`, or None where it says nothing: no rank or call, a peer outside [0, world) or the
    rank itself. The one test of an op, for a rank read raw (`stack_ops`) and one judged from a summary's class."""
    if rank is None or call is None or call[0] not in P2P_PEER_ARG:
        return None
    peer = call[1]
    if type(peer) is not int or peer < 0 or peer == rank or (world and peer >= world):
        return None
    return StackOp(rank, call[0], peer, pid, host, file)


def stack_ops(ranks: Any, world: int | None) -> dict[int, StackOp]:
    """rank -> its main thread's blocking send or recv with a kept peer (a rank of [0, world), not itself)."""
    out: dict[int, StackOp] = {}
    for r in list(ranks or ())[:MAX_RANKS]:
        call = blocking_call(r.main_stack)
        if call is None or r.rank is None:
            continue
        rec = r.record
        file = next((a.cite for a in getattr(r, "files", ()) if a.parsed and a.parsed.kind == "pyspy-json"), None)
        op = stack_op(r.rank, call, world, rec.pid, rec.host, file)
        if op is not None:
            out[r.rank] = op
    return out


def judge_stacks(ops: dict[int, StackOp]) -> tuple[list[WaitEdge], list[Suspect]]:
    """The wait edges of the ops and the wrong-peer suspects among them (see the module's doc)."""
    import networkx as nx  # here, not at the top: the digest's readers import this module and never build a graph

    edges = [_edge(op, ops.get(op.peer)) for op in ops.values() if not op.answers(ops.get(op.peer))]
    g = nx.DiGraph((e.waiter, e.peer) for e in edges if e.can_close_a_cycle)
    blocked = {r for c in nx.strongly_connected_components(g) if len(c) > 1 for r in c}
    suspects = []
    for op in sorted(ops.values(), key=lambda o: o.rank):
        peer = ops.get(op.peer)
        if op.rank not in blocked or op.answers(peer) or peer is None or peer.kind != op.pairing:
            continue
        others = sorted(q for q, o in ops.items() if q not in (op.peer, op.rank) and o.kind == op.pairing
                        and o.peer == op.rank)
        if others:
            suspects.append(_wrong_peer(op, peer, [ops[q] for q in others]))
    return edges, suspects


def _edge(op: StackOp, peer: StackOp | None) -> WaitEdge:
    """The wait of `op` on its peer: 'unmatched' where the peer's stack shows it in another op (seen, at the same
    look), 'unknown' where no stack of the peer says what it does (a wait, never a cycle's edge)."""
    theirs = f"rank {peer.rank} is in {peer.words()}" if peer else f"no stack shows rank {op.peer} in a send or recv"
    return WaitEdge(comm_id=DEFAULT_GROUP, waiter=op.rank, peer=op.peer, source="stacks", op=op.kind, scope="group",
                    p2p_peer=op.peer, waiter_pid=op.pid, waiter_host=op.host, global_ranks=True,
                    detail=f"its main thread is in {op.words()} (py-spy --locals); {theirs}",
                    p2p_match="unmatched" if peer else "unknown")


def _wrong_peer(op: StackOp, peer: StackOp, others: list[StackOp]) -> Suspect:
    """'rank 4 posts recv from 2, which never sends to it, while rank 3's send to it goes unanswered'."""
    never = "sends to it" if op.kind == "recv" else "receives from it"
    theirs = "send" if op.kind == "recv" else "receive"
    ranks = [o.rank for o in others]
    said = (f"rank{'s' if len(ranks) > 1 else ''} {fold(ranks)}'s {theirs}{'s' if len(ranks) > 1 else ''} "
            f"{'to' if op.kind == 'recv' else 'from'} it goes unanswered")
    return Suspect(
        rank=op.rank, host=op.host, pid=op.pid, reason_class=ReasonClass.WRONG_PEER, source="stacks",
        reason=of_rank(op.rank, f"posts {op.words()}, which never {never}, while {said}: it waits on the wrong peer"),
        confidence=ReasonClass.WRONG_PEER.default_confidence,
        evidence=[cite(f"main thread in {op.words()}; rank {peer.rank} in {peer.words()}; "
                       + "; ".join(f"rank {o.rank} in {o.words()}" for o in others[:3])
                       + "; every rank of the wait cycle blocked [stacks, py-spy --locals]",
                       tool="stacks", file=op.file, tagged=True)])
