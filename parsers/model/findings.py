"""What judges return: suspects, the verdict, and wait edges between ranks.

Judges turn the evidence model into these; presentation (text, JSON, HTML,
notebook) reads only these.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass
class Suspect:
    """A rank the evidence points at, why, and how sure we are (0..1)."""

    rank: int | None
    host: str | None
    pid: int | None
    reason_class: str  #: short machine-readable kind: 'stopped', 'outside-collective', 'missing', ...
    reason: str  #: one human sentence
    confidence: float
    evidence: list[str] = field(default_factory=list)

    def sort_key(self) -> tuple[float, int]:
        """Most likely first; among equals, the lower rank."""
        return (-self.confidence, self.rank if self.rank is not None else 1 << 30)

    @property
    def label(self) -> str:
        who = f"rank {self.rank}" if self.rank is not None else "a process"
        where = " ".join(x for x in (self.host, f"pid {self.pid}" if self.pid else None) if x)
        return f"{who} ({where})" if where else who

    def to_dict(self) -> dict[str, Any]:
        return {
            "rank": self.rank,
            "host": self.host,
            "pid": self.pid,
            "reason_class": self.reason_class,
            "reason": self.reason,
            "confidence": round(self.confidence, 3),
            "evidence": list(self.evidence),
        }


@dataclass
class Verdict:
    """The answer: suspects (most likely first), a one-line summary, and what is missing."""

    suspects: list[Suspect] = field(default_factory=list)
    summary: str = ""
    missing_evidence: list[str] = field(default_factory=list)
    sections: dict[str, Any] = field(default_factory=dict)  #: extra tables (stack tree, missing-line table...)
    graph: Any = None  #: networkx.DiGraph of global ranks (waiter -> waited on) from the log correlation, if any

    @property
    def culprit(self) -> Suspect | None:
        return self.suspects[0] if self.suspects else None

    def to_dict(self) -> dict[str, Any]:
        return {
            "summary": self.summary,
            "culprit": self.culprit.to_dict() if self.culprit else None,
            "suspects": [s.to_dict() for s in self.suspects],
            "missing_evidence": list(self.missing_evidence),
            "sections": self.sections,
        }


@dataclass(frozen=True)
class WaitEdge:
    """'waiter waits on peer' inside one communicator, from any source (recorder, logs, RAS).

    Ranks here are communicator ranks; the correlation maps them to global ranks
    and hosts with the communicator's init lines or the bundle manifest.
    """

    comm_id: str  #: commId/hash as hex string, or a PG name when that is all we know
    waiter: int  #: communicator rank that waits
    peer: int  #: communicator rank it waits on
    source: str  #: 'recorder', 'nccl-log', 'ras', 'c10d', ...
    op: str | None = None  #: e.g. 'AllReduce seq 11'
    channel: int | None = None
    state: str | None = None  #: e.g. 'RecvWait', 'SendPeerWait'
    waiter_pid: int | None = None
    waiter_host: str | None = None
    detail: str = ""
