"""NCCL_PROXY_DUMP_SIGNAL output: the proxy thread's active network operations.

Why: it is the only NCCL-native view of *which peer* a rank's network proxy is
stuck on. After `NCCL_PROXY_DUMP_SIGNAL=10` and SIGUSR1 the process prints to its
stdout `ACTIVE OPS`, then per op `[pool-op|opCount| Coll peer<status>/channel ...]`,
chained peers as `| `-> [...]`, `|` / `v` between ops and `[X]` at the end. Status
letters: I init, R receiving, F flushing, G waiting on GPU, S sending, D done. A rank
receiving (R) or sending (S) to peer P waits on P; G and D do not point at a peer.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

#: possessive runs: a record without its ']' is given up once, not once per split of its letters
#: subs bounded: an op's sub list is a few entries a channel (about 1 KB at 64 channels); unbounded, a line of
#: 20,000 unclosed op starts scanned to its end from each (a 1.3 MB line, 3.8 s)
_OP = re.compile(r"\[(?P<pool>\d++)-(?P<idx>\d++)\|(?P<oc>-?\d++)\| ?(?P<kind>[A-Za-z]++)(?P<subs>[^\]]{0,8192}+)\]")
#: (?<![\d-]): a peer starts where a number starts, never inside a digit run (a long run cost its square)
_SUB = re.compile(r"(?<![\d-])(?P<peer>-?\d++)(?P<st>[A-Z]?)\s*+/(?P<ch>\d+)")

WAITING = {"R": "receiving", "S": "sending", "F": "flushing", "I": "init"}


@dataclass
class ProxyOp:
    """One active proxy operation and its per-peer sub-operations."""

    op_count: int
    kind: str  #: Coll, Send, Recv
    subs: list[tuple[int, str, int]] = field(default_factory=list)  #: (peer comm rank, status letter, channel)

    def waits_on(self) -> list[int]:
        """Peers whose data this op is stuck exchanging (status R/S/F/I)."""
        return sorted({peer for peer, st, _ in self.subs if st in WAITING and peer >= 0})


def parse_block(lines: list[str]) -> tuple[list[ProxyOp], int]:
    """Parse the lines between `ACTIVE OPS` and `[X]`; returns (ops, unknown line count)."""
    ops: list[ProxyOp] = []
    unknown = 0
    for line in lines:
        text = line.strip()
        if not text or text in ("|", "v", "[X]", "ACTIVE OPS"):
            continue
        found = len(ops)
        for _pool, _idx, oc, kind, subs in _OP.findall(text):  # (a dump is thousands of ops a rank: one call a match)
            ops.append(ProxyOp(int(oc), kind, [(int(peer), st, int(ch)) for peer, st, ch in _SUB.findall(subs)]))
        if len(ops) == found:
            unknown += 1
    return ops, unknown


def is_start(text: str) -> bool:
    return text.strip() == "ACTIVE OPS"


def is_end(text: str) -> bool:
    return text.strip() == "[X]"
