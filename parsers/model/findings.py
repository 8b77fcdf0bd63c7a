"""What judges return: suspects, the verdict, and wait edges between ranks.

Judges turn the evidence model into these; presentation (text, JSON, HTML,
notebook) reads only these.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import Enum
from typing import Any


class ReasonClass(str, Enum):
    """Why a rank is a suspect. Each class knows whether it is an observed fact about the
    process or host (stopped, gone, a host fault) or an inferred claim (the others wait on
    it), and the confidence a judge gives it when nothing raises or lowers it.

    Observed facts head a merged suspect: they say *why*, where claims only say *that*.
    A str Enum, so JSON and comparisons with the plain names keep working.
    """

    def __new__(cls, value: str, observed: bool, confidence: float, text: str) -> "ReasonClass":
        obj = str.__new__(cls, value)
        obj._value_ = value
        obj.observed = observed
        obj.default_confidence = confidence
        obj.text = text
        return obj

    STOPPED = ("stopped", True, 0.95, "the process is stopped (SIGSTOP or a debugger)")
    MISSING = ("missing", True, 0.90, "the process the job needs does not exist")
    EXITED = ("exited", True, 0.90, "the process has exited while the job runs on")
    HOST_FAULT = ("host-fault", True, 0.85, "its host has a hardware or system fault")
    KNOWN_ERROR = ("known-error", True, 0.85, "its own log names a known error")
    KERNEL_WAIT = ("kernel-wait", True, 0.70, "stuck in the kernel (state D)")
    FROZEN_IN_OP = ("entered-then-frozen", True, 0.95, "entered a collective and stopped progressing")
    EXITED_FIRST = ("exited-first", True, 0.75, "the first rank to die")
    RAISED = ("raised", True, 0.85, "its own output ends in an exception that is a cause, not a symptom")
    NEVER_JOINED = ("never-joined", False, 0.80, "never joined the rendezvous the others wait in")
    OUTSIDE = ("outside-collective", False, 0.80, "in no collective while the others wait")
    DATA_WAIT = ("data-wait", False, 0.85, "its main thread waits for its DataLoader workers while the others wait")
    MISMATCH = ("mismatch", False, 0.60, "called a different collective than its peers")
    FR_MISSING = ("fr-missing", False, 0.60, "the Flight Recorder analyzer finds its dump lacks a collective the others scheduled")
    FR_CULPRIT = ("fr-culprit", False, 0.50, "the Flight Recorder analyzer finds its collective differs from the reference rank's")
    WAIT_ROOT = ("wait-root", False, 0.75, "the root of the wait-for graph")
    MISSING_LINE = ("missing-line", False, 0.70, "never logged the operation the others wait in")
    NO_DUMP = ("no-dump", False, 0.60, "left no evidence where the others did")
    ABSENT = ("absent", False, 0.60, "no process on any collected host")
    STALLED = ("stalled-in-collective", False, 0.70, "its peers wait for data from it in a collective")
    GPU_QUEUED = ("gpu-queued", True, 0.85, "its collective was enqueued but never started on the GPU")
    STALLED_FIRST = ("stalled-first", False, 0.60, "the first to stall")
    WAIT_CYCLE = ("wait-cycle", False, 0.50, "in a wait cycle")
    BEHIND = ("behind", False, 0.60, "behind the others in a communicator")
    RAS_BEHIND = ("ras-behind", False, 0.50, "NCCL RAS reports it behind")
    RAS_MISSING = ("ras-missing", False, 0.50, "NCCL RAS reports it missing")
    RAS_DEAD = ("ras-dead", False, 0.50, "NCCL RAS reports it dead")
    LOST_PEER = ("lost-peer", False, 0.50, "the one peer that the ranks which lost a connection share")
    SILENT = ("silent", False, 0.45, "reported no error while others failed")
    ERROR_FIRST = ("error-first", False, 0.30, "logged the first error")
    STRAGGLER = ("straggler", False, 0.70, "a running job's collectives wait for it, op after op")
    SLOW_HOST = ("slow-host", False, 0.70, "every rank of its host enters collectives last")
    SLOW_LINK = ("slow-link", False, 0.60, "its data spends longer on the network than any other link's")

    def __str__(self) -> str:
        return self.value

    def __format__(self, spec: str) -> str:
        return format(self.value, spec)

    @classmethod
    def of(cls, name: "str | ReasonClass") -> "ReasonClass | None":
        """The class called `name`, or None for a name no judge uses."""
        try:
            return cls(name)
        except ValueError:
            return None


def is_observed(reason_class: "str | ReasonClass") -> bool:
    """True for facts about the process or host itself (they lead a merged suspect)."""
    rc = ReasonClass.of(reason_class)
    return bool(rc and rc.observed)


#: the least confidence at which a suspect is named as the culprit (below: a lead, listed only)
CULPRIT_MIN_CONFIDENCE = 0.5


@dataclass
class Suspect:
    """A rank the evidence points at, why, and how sure we are (0..1)."""

    rank: int | None
    host: str | None
    pid: int | None
    reason_class: str  #: a ReasonClass (a str): 'stopped', 'outside-collective', 'missing', ...
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
            "reason_class": str(self.reason_class),
            "observed": is_observed(self.reason_class),
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
    stack_tree: Any = None  #: parsers.stacks.tree.Node of the main-thread stacks (sections["stack_tree"] is its JSON)

    @property
    def culprit(self) -> Suspect | None:
        """The leading suspect, when its evidence is worth a name (CULPRIT_MIN_CONFIDENCE or more).

        Why a floor: 'rank 4 logged the first error' at 0.3 is a lead, not a culprit; an
        on-call engineer acting on it would drain the wrong machine. Leads stay in `suspects`.
        """
        head = self.suspects[0] if self.suspects else None
        return head if head is not None and head.confidence >= CULPRIT_MIN_CONFIDENCE else None

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
