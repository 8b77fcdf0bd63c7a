"""The one event model every reader produces, whatever the source.

NCCL logs, c10d messages, Flight Recorder dumps, RAS reports and proxy dumps all
describe the same few things: who is in which communicator (CommMember), which
operations a rank enqueued or finished (OpEvent), how far it got (Progress), what
went wrong (ErrorEvent), and who talks to whom (TopoEdge). Putting them in one form
is what lets the correlation compare a rank's NCCL log with another rank's FR dump.

Identity: `comm` is a communicator key: the NCCL commId/hash as '0x...' hex when
known, else 'pg:<name or id>' for a PyTorch process group. Ranks inside events are
communicator ranks (`comm_rank`); the process's global rank, host and pid, when the
artifact knows them, ride along and let the correlation map one to the other.
"""

from __future__ import annotations

import signal

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from parsers.model.samples import StackSamples

#: Normalised collective names, so 'AllReduce', 'ALLREDUCE', 'gloo:all_reduce',
#: 'nccl:all_reduce' and 'allreduce_coalesced' compare equal where they mean the same.
_OP_ALIASES = {
    "allreduce": "allreduce",
    "allreducecoalesced": "allreduce",
    "allgather": "allgather",
    "allgatherintotensor": "allgather",
    "allgatherbase": "allgather",
    "allgathercoalesced": "allgather",
    "reducescatter": "reducescatter",
    "reducescattertensor": "reducescatter",
    "reducescatterbase": "reducescatter",
    "broadcast": "broadcast",
    "reduce": "reduce",
    "barrier": "barrier",
    "alltoall": "alltoall",
    "alltoallbase": "alltoall",
    "send": "send",
    "recv": "recv",
    "gather": "gather",
    "scatter": "scatter",
    "sendrecv": "sendrecv",
}


def normalise_op(name: str | None) -> str | None:
    """'gloo:all_reduce' / 'AllReduce' / 'ALLREDUCE' -> 'allreduce'; unknown names stay lower-case."""
    if not name:
        return None
    base = name.rsplit(":", 1)[-1].lower().replace("_", "").replace(" ", "")
    return _OP_ALIASES.get(base, base)


#: the host of evidence whose files and lines name none (a loose paste): a placeholder, said as such
UNKNOWN_HOST = "unknown-host"

#: most ranks a job, a communicator or a world size from data may claim (the largest jobs run about 10^5).
#: Why a bound in the model: judges size sets and loops by a stated world; `nranks 4000000000` in one
#: hostile line must not become a 4-billion-element range. A larger claim is no claim (None).
MAX_RANKS = 1 << 20


def plausible_size(value: object) -> int | None:
    """A rank count from data (nranks, WORLD_SIZE) when it is one a real job could have, else None."""
    return value if isinstance(value, int) and not isinstance(value, bool) and 0 < value <= MAX_RANKS else None


def plausible_rank(value: object) -> int | None:
    """A rank from data when it lies in [0, MAX_RANKS), else None."""
    return value if isinstance(value, int) and not isinstance(value, bool) and 0 <= value < MAX_RANKS else None


@dataclass(slots=True)
class Origin:
    """Which process an event came from, as far as its artifact can tell."""

    host: str | None = None
    pid: int | None = None
    rank: int | None = None  #: global rank
    file: str | None = None
    line: int | None = None
    device: int | None = None  #: CUDA device index (NCCL's `[d]` bracket): not a rank
    #: rank among its host's workers (torchrun's `[default3]:` label): a process's identity on its host, not a
    #: global rank until something in the file maps one to the other (torchelastic's failure table)
    local_rank: int | None = None

    @property
    def writer(self) -> tuple:
        """Whose output a line is, by what a launcher's prefix says (local rank, pid, host): the key that keeps
        interleaved processes apart. Not the rank: c10d prints `[rankN]:` on a message's first line only."""
        return self.local_rank, self.pid, self.host


@dataclass(slots=True)
class CommMember:
    """A rank joined a communicator (NCCL init line, FR pg_config, RAS comm list)."""

    comm: str
    comm_rank: int | None
    nranks: int | None
    origin: Origin
    comm_ptr: str | None = None  #: NCCL's `comm 0x...` pointer: op lines name it, not the commId
    pg_name: str | None = None
    global_ranks: list[int] | None = None  #: the group's members as global ranks (FR pg_config)
    parent: str | None = None  #: split communicators: the parent commId when logged
    source: str = ""
    aliases: list[str] | None = None  #: other keys this process's logs use for the comm ('pg:pg_C', 'pg:3')

    def __post_init__(self) -> None:
        # sizes from data are bounded here, once for every reader (see MAX_RANKS)
        self.nranks = plausible_size(self.nranks)
        self.comm_rank = plausible_rank(self.comm_rank)


@dataclass(slots=True)
class OpEvent:
    """One collective or p2p operation seen at one rank."""

    comm: str
    comm_rank: int | None
    op: str  #: normalised, see normalise_op
    seq: int  #: position in the communicator's stream (opCount, collective_seq_id, SeqNum)
    origin: Origin
    seq_kind: str = "seq"  #: 'opCount' (NCCL, per launch) or 'seq' (PyTorch collective seq)
    state: str = "enqueued"  #: enqueued | started | completed | timed-out | in-flight
    count: int | None = None  #: elements
    dtype: str | None = None
    sizes: str | None = None  #: FR input sizes as text, for mismatch messages
    peer: int | None = None  #: p2p / root
    source: str = ""
    time_ns: int | None = None  #: when the rank enqueued it (Flight Recorder time_created_ns), if recorded


@dataclass(slots=True)
class Progress:
    """How far a rank got in one communicator / process group: the c10d and FR counters."""

    comm: str
    origin: Origin
    last_enqueued: int | None = None
    last_started: int | None = None
    last_completed: int | None = None
    comm_rank: int | None = None
    source: str = ""


@dataclass(slots=True)
class ErrorEvent:
    """Something went wrong, as the artifact says it. `kind` is a short class name."""

    kind: str  #: watchdog-timeout, failure-detected, connection-closed, ib-completion, gloo-timeout, nccl-warn, ...
    message: str
    origin: Origin
    comm: str | None = None
    seq: int | None = None
    op: str | None = None
    peer_addr: str | None = None  #: 'host<port>' / '[ip]:port' the error names
    timestamp: str | None = None
    source: str = ""
    #: what the line says beyond the common fields: exitcode, local_rank, joined/expected,
    #: xid, pci, nccl_version, group_rank, type (exception), function (traceback frame), ...
    data: dict = field(default_factory=dict)


#: ErrorEvent kinds that record what a line said without saying anything failed (an `[I ...]`
#: c10d line such as "watchdog thread started", the group's TIMEOUT(ms) option, a collective a
#: rank starts as ProcessGroupWrapper logs it (c10d-fingerprint), the watchdog's note that the Flight
#: Recorder is off (fr-disabled), an NVRM driver
#: message that matched no fault such as "loading NVIDIA UNIX Open Kernel Module", torch's teardown warning that
#: destroy_process_group() was not called, printed by ranks that finished): read and kept, never weighed as an error.
INFO_KINDS = frozenset({"c10d-info", "pg-timeout", "nvrm", "c10d-fingerprint", "fr-disabled", "collective-stack",
                        "child-error-file", "horovod-log", "c10d-teardown",
                        "horovod-stall", "horovod-stall-warning", "rank-identity", "job-size"})

#: a watchdog's own word that a rank waited in one collective of its group, at a position (SeqNum)
TIMEOUT_KINDS = frozenset({"watchdog-timeout", "failure-detected"})
#: errors a rank prints while it waits on a peer that is gone or late (timeouts, closed or reset connections, a
#: monitored_barrier that names the ranks that did not arrive, or a rank that lost its wait for that report)
WAIT_ERRORS = TIMEOUT_KINDS | {"gloo-timeout", "connection-closed", "connection-reset", "nccl-timeout",
                               "ib-completion", "net-error", "barrier-absent", "barrier-wait"}


def own_error(event: object) -> bool:
    """An error a process reports of itself: an ErrorEvent that is no mere information (INFO_KINDS) and no wait on
    a peer (WAIT_ERRORS). What makes a rank odd by itself, whatever the others do (parsers.scale.digest's flags and odd
    ones out, and the raw reads digest first and the focus choose from them)."""
    return type(event) is ErrorEvent and event.kind not in INFO_KINDS and event.kind not in WAIT_ERRORS


@dataclass(slots=True)
class TopoEdge:
    """Who exchanges data with whom in a communicator: ring, tree or channel connection."""

    comm: str
    src: int  #: comm rank that sends
    dst: int  #: comm rank that receives
    kind: str  #: ring | tree | channel
    origin: Origin | None = None
    channel: int | None = None


@dataclass(slots=True)
class RasFinding:
    """One RAS verdict line about one communicator rank (lags, missing, dead)."""

    comm: str
    kind: str  #: 'behind' | 'ahead' | 'member' | 'missing' | 'dead' | 'status' | 'error' (reported an async error)
    #: | 'count' (the rank's total collectives, every rank: two reads tell progress)
    comm_rank: int | None
    pid: int | None
    host: str | None
    op_count: int | None = None
    op: str | None = None
    text: str = ""


Event = CommMember | OpEvent | Progress | ErrorEvent | TopoEdge | RasFinding


#: states in which a process cannot run: stopped, traced-stopped, zombie, dead, uninterruptible sleep
FROZEN_STATES = ("T", "t", "Z", "X", "D")


def describe_status(status: int | None) -> str:
    """'exit code 1', 'killed by SIGKILL (9)', or 'exit status unknown', from a wait status
    (what /proc/PID/stat keeps for a zombie, and what waitpid returns)."""
    if status is None:
        return "exit status unknown"
    if status & 0x7F:
        sig = status & 0x7F
        try:
            name = signal.Signals(sig).name
        except ValueError:
            name = f"signal {sig}"
        return f"killed by {name} ({sig})" + (", core dumped" if status & 0x80 else "")
    return f"exit code {(status >> 8) & 0xFF}"


@dataclass(frozen=True)
class ProcessState:
    """A process as /proc showed it at collection: state letter, wait channel, threads.

    `threads` holds (tid, name, state, wchan) tuples; `raw` keeps the file's other fields
    for tables. Derived facts are properties so every judge reads them the same way.
    """

    pid: int
    state: str
    comm: str | None = None
    ppid: int | None = None
    uid: int | None = None
    wchan: str | None = None
    tracer_pid: int | None = None
    vm_rss_kb: int | None = None
    threads: tuple = ()
    raw: dict = field(default_factory=dict, compare=False, repr=False)
    exit_status: int | None = None  #: wait status of an exited, unreaped process

    @property
    def ended(self) -> str | None:
        """How an exited process ended ('exit code 1', 'killed by SIGKILL (9)'), if it has."""
        return describe_status(self.exit_status) if self.gone else None

    @property
    def frozen(self) -> bool:
        """Cannot run: stopped, traced-stopped, zombie, dead or in uninterruptible sleep."""
        return self.state in FROZEN_STATES

    @property
    def stopped(self) -> bool:
        return self.state in ("T", "t")

    @property
    def gone(self) -> bool:
        return self.state in ("Z", "X")

    def get(self, key: str, default=None):
        """Dict-style access for the fields tables show (proc.json names)."""
        return getattr(self, key, None) if key in _PROCESS_FIELDS else self.raw.get(key, default)


_PROCESS_FIELDS = ("pid", "state", "comm", "ppid", "uid", "wchan", "tracer_pid", "vm_rss_kb")


@dataclass
class Parsed:
    """What one reader got from one artifact: the evidence, plus honest counts of what it skipped.

    Every reader fills the fields its source has and leaves the rest empty; the pipeline
    groups them by process and host. Facts keep their source through `Origin.file/line`
    (events) or the artifact they came from (the rest).
    """

    kind: str
    events: list = field(default_factory=list)
    lines: int = 0
    unknown_lines: int = 0
    problems: list[str] = field(default_factory=list)
    stacks: list = field(default_factory=list)  #: parsers.model.stacks.ThreadStack from stack dumps
    facts: dict = field(default_factory=dict)  #: identity learned from content: host, pid, rank, world_size, job_id
    process: ProcessState | None = None  #: /proc state (process-state files)
    host_facts: dict = field(default_factory=dict)  #: subject ('gpu 0000:3b:00.0', 'memory', ...) -> {fact: value}
    exits: list = field(default_factory=list)  #: parsers.readers.launcher.RankExit from launcher records
    recorder: list = field(default_factory=list)  #: parsers.readers.recorder.RecorderState
    notes: list = field(default_factory=list)  #: (line number, text) worth matching against the knowledge base
    exceptions: list = field(default_factory=list)  #: parsers.readers.exception.PyException, in order
    samples: StackSamples | None = None  #: parsers.model.samples.StackSamples (stack samples over seconds), else None
    step_series: Any = None  #: parsers.steps.series.StepSeries (forensics.arm()'s per-step times of one rank), else None
    second_look: Any = None  #: parsers.model.looks.SecondLook (collect --second-look), else None
    #: (line number, text) of lines that look like NCCL/PyTorch/launcher/host output but that no
    #: pattern understood: reported, never dropped in silence (bounded, see MAX_UNREAD)
    unread: list = field(default_factory=list)

    def note_unread(self, lineno: int, text: str) -> None:
        """Keep a recognisable line no reader understood (the first MAX_UNREAD of them)."""
        self.unknown_lines += 1
        self.facts["unread_lines"] = self.facts.get("unread_lines", 0) + 1
        if len(self.unread) < MAX_UNREAD:
            self.unread.append((lineno, text[:500]))


MAX_UNREAD = 200
