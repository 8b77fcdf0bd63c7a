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

from dataclasses import asdict, dataclass, field, is_dataclass
from enum import StrEnum
from typing import TYPE_CHECKING, Any, Iterator

from parsers.model import states

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


class ErrorKind(StrEnum):
    """Every kind of ErrorEvent a reader writes: the one list, so a misspelt kind fails where the event is made
    (ErrorEvent refuses any other) instead of matching nothing in a judge. A StrEnum: each compares and hashes as
    its text, so JSON, digests and a compare with the plain text keep working."""

    WATCHDOG_TIMEOUT = "watchdog-timeout"  #: c10d's watchdog caught a collective past its timeout (SeqNum, op)
    FAILURE_DETECTED = "failure-detected"  #: c10d's watchdog reports a failure in a collective (its SeqNum)
    GLOO_TIMEOUT = "gloo-timeout"  #: gloo: a collective or transfer timed out
    CONNECTION_CLOSED = "connection-closed"  #: a peer closed its connection (gloo, NCCL, mpirun's report)
    CONNECTION_RESET = "connection-reset"  #: a peer reset its connection
    NCCL_TIMEOUT = "nccl-timeout"  #: NCCL WARN that says a timeout
    IB_COMPLETION = "ib-completion"  #: NCCL: an InfiniBand completion error naming its peer
    NET_ERROR = "net-error"  #: an NCCL net plugin's error (NET/...)
    BARRIER_ABSENT = "barrier-absent"  #: monitored_barrier: the ranks that did not arrive
    BARRIER_WAIT = "barrier-wait"  #: monitored_barrier: a rank lost its wait for the barrier's report
    STORE_TIMEOUT = "store-timeout"  #: the c10d store timed out (a rank's wait for another's key, its NCCL unique id)
    PEER_CLOSED = "peer-closed"  #: NCCL: the remote peer closed the connection
    SIZE_MISMATCH = "size-mismatch"  #: NCCL: a peer's message of another size than this rank posted (truncated)
    NET_ADDRESS = "net-address"  #: NCCL: the addresses a process uses (who a peer's address is)
    C10D_INFO = "c10d-info"  #: an [I ...] c10d line that says nothing failed
    PG_TIMEOUT = "pg-timeout"  #: a process group's TIMEOUT(ms) option
    NVRM = "nvrm"  #: an NVRM driver line that matched no fault
    C10D_FINGERPRINT = "c10d-fingerprint"  #: ProcessGroupWrapper's fingerprint of a collective a rank starts
    FR_DISABLED = "fr-disabled"  #: the watchdog's note that the Flight Recorder is off
    COLLECTIVE_STACK = "collective-stack"  #: c10d's stack of a collective (its frames fill from the lines below)
    CHILD_ERROR_FILE = "child-error-file"  #: torchelastic's note of a child's error file
    HOROVOD_LOG = "horovod-log"  #: a Horovod line at an information level
    C10D_TEARDOWN = "c10d-teardown"  #: torch's warning that destroy_process_group() was not called
    HOROVOD_STALL = "horovod-stall"  #: Horovod's stall inspector: a tensor and the ranks missing or ready
    HOROVOD_STALL_WARNING = "horovod-stall-warning"  #: Horovod's stall inspector's heading
    RANK_IDENTITY = "rank-identity"  #: a launcher line that states a process's rank
    JOB_SIZE = "job-size"  #: a launcher line that states the job's size
    C10D_ERROR = "c10d-error"  #: an [E ...] or [F ...] c10d line
    C10D_WARNING = "c10d-warning"  #: a [W ...] c10d line
    NCCL_ERROR = "nccl-error"  #: an NCCL error (c10d's ncclInternalError..., nccl-tests' NCCL failure)
    NCCL_WARN = "nccl-warn"  #: an NCCL WARN line
    NCCL_ABORT = "nccl-abort"  #: NCCL: a communicator aborted
    NCCL_LAST_ERROR = "nccl-last-error"  #: NCCL's own reason under a c10d NCCL error (the line after 'Last error:')
    COLLECTIVE_MISMATCH = "collective-mismatch"  #: a collective that differs across ranks (ProcessGroupWrapper)
    DESYNC_LAGGING = "desync-lagging"  #: the desync debug report's ranks that did not join the collective
    DESYNC_STATE = "desync-state"  #: the desync debug report's state of a rank
    DUMP_SIGNAL = "dump-signal"  #: c10d's trigger of a Flight Recorder dump (a signal, a global timeout)
    HEARTBEAT = "heartbeat"  #: c10d's heartbeat monitor: the watchdog stopped its heartbeat
    TERMINATE = "terminate"  #: c10d's "Terminating the process"
    PYTHON_EXCEPTION = "python-exception"  #: an exception a line names (Python's, C++ terminate, Ray's unhandled)
    PYTHON_FRAME = "python-frame"  #: a torch/distributed frame of a traceback
    PYTHON_FATAL = "python-fatal"  #: a `Fatal Python error:` line (faulthandler)
    PROCESS_SIGNAL = "process-signal"  #: a fatal-signal report (Open MPI/UCX crash handler)
    DDP_UNUSED_PARAMETERS = "ddp-unused-parameters"  #: DDP's reducer: parameters that received no gradient
    LAUNCHER_EXIT = "launcher-exit"  #: a launcher's report that a process exited (exit code, local rank, pid)
    LAUNCHER_SIGNAL = "launcher-signal"  #: a launcher sent a process a signal
    AGENT_SIGNAL = "agent-signal"  #: torchelastic's agent received a death signal
    ROOT_CAUSE = "root-cause"  #: torchelastic's ChildFailedError block: the root cause entry
    CHILD_FAILURE = "child-failure"  #: torchelastic's ChildFailedError block: another failure entry
    GLOO_ERROR = "gloo-error"  #: gloo: another error
    CUDA_ERROR = "cuda-error"  #: a CUDA error pasted in a log
    CUDA_DRIVER_MISMATCH = "cuda-driver-mismatch"  #: CUDA: the driver is older than the runtime
    GPU_LOST = "gpu-lost"  #: a GPU fell off the bus
    PCIE_ERROR = "pcie-error"  #: a PCIe error pasted in a log
    XID = "xid"  #: an NVIDIA Xid line pasted in a log
    TEST_FAILURE = "test-failure"  #: nccl-tests' trail of a failure
    HOROVOD_ERROR = "horovod-error"  #: a Horovod line at an error level
    HOROVOD_TIMELINE_ERROR = "horovod-timeline-error"  #: Horovod's timeline error
    FR_ANALYSIS = "fr-analysis"  #: a line of the Flight Recorder analyzer's report


@dataclass(slots=True)
class ErrorEvent:
    """Something went wrong, as the artifact says it. `kind` is one of ErrorKind (its text is taken and made the
    member; any other is refused with a ValueError: a digest that carries one is refused whole)."""

    kind: ErrorKind
    message: str
    origin: Origin
    comm: str | None = None
    seq: int | None = None
    op: str | None = None
    peer_addr: str | None = None  #: 'host<port>' / '[ip]:port' the error names
    timestamp: str | None = None
    source: str = ""
    #: what the line says beyond the common fields: the kind's typed data (TYPED_DATA: an fr-analysis event's is an
    #: FrFinding, a launcher-exit event's a WorkerReport, an xid event's a DeviceFault, ...), read by attribute. A dict
    #: is only what it is built from (a caller's, a version-1 digest's): typed here, never kept
    data: dict | TypedData = field(default_factory=dict)

    def __post_init__(self) -> None:
        try:
            self.kind = ErrorKind(self.kind)
        except ValueError:
            raise ValueError(f"an ErrorEvent's kind must be one of ErrorKind, not {str(self.kind)[:60]!r}") from None
        typed = TYPED_DATA[self.kind]
        if type(self.data) is not typed:  # a dict (a digest's, a caller's): typed, or refused
            if not isinstance(self.data, dict):  # a digest's forged typed data of another kind
                raise ValueError(f"a {self.kind} event's data must be a {typed.__name__}, "
                                 f"not {type(self.data).__name__}")
            self.data = typed.from_dict(self.data)


#: the plain types a typed data field may name in its annotation
_PLAIN = {"int": int, "str": str, "bool": bool, "None": type(None), "dict": dict, "list": list, "tuple": tuple}
#: most items a list of typed data may hold (a list of ranks is at most a job's)
MAX_ITEMS = MAX_RANKS
#: fields of typed data that hold a rank or a list of ranks: bounded as every rank from data is (plausible_rank;
#: one out of range is no claim: None, or left out of its list)
RANK_FIELDS = frozenset({"rank", "local_rank", "group_rank", "from_rank", "missing", "ready", "missing_ranks",
                         "expected_ranks", "no_dump_ranks", "absent", "lagging", "ranks", "tasks", "comm_rank",
                         "waits_for", "peer"})
#: fields of typed data that hold a job's or a group's size (plausible_size)
SIZE_FIELDS = frozenset({"world_size", "expected_count", "nranks", "expected"})


def _rule(annotation: str) -> tuple[tuple[type, ...], type | None]:
    """(the types a field's annotation allows, the type of its list's items or None): 'int | None' ->
    ((int, NoneType), None); 'list[int] | None' -> ((list, NoneType), int). Names are this module's."""
    allowed: list[type] = []
    item = None
    for part in annotation.split("|"):
        base, _, inner = part.strip().partition("[")
        allowed.append(_PLAIN.get(base) or globals()[base])
        if inner:
            inner = inner.rstrip("]")
            item = _PLAIN.get(inner) or globals()[inner]
    return tuple(allowed), item


#: per typed data class, per field: _rule of its annotation (computed on the class's first instance)
_RULES: dict[type, dict[str, tuple[tuple[type, ...], type | None]]] = {}


def _is(value: object, types: tuple[type, ...]) -> bool:
    """isinstance, except that a bool is no int (JSON's true is not a rank)."""
    return isinstance(value, types) and (type(value) is not bool or bool in types)


class TypedData:
    """What every typed `data` of an ErrorEvent offers besides its fields: built from a dict (a caller's, an old
    digest's: a key that is no field is a ValueError), checked when made (each field of its annotated type, a list
    at most MAX_ITEMS long, ranks and sizes bounded as the model bounds them: hostile JSON cannot put a string where
    a judge does arithmetic), and written back as a dict (`to_dict`: the fields set, for JSON and records)."""

    __slots__ = ()

    def __post_init__(self) -> None:
        cls = type(self)
        rules = _RULES.get(cls)
        if rules is None:
            fields = cls.__dataclass_fields__  # type: ignore[attr-defined]
            rules = _RULES[cls] = {n: _rule(f.type) for n, f in fields.items()}
        for name, (types, item) in rules.items():
            value = getattr(self, name)
            if value is None:
                continue
            if not _is(value, types) or item is not None and (len(value) > MAX_ITEMS
                                                              or not all(_is(x, (item,)) for x in value)):
                wanted = cls.__dataclass_fields__[name].type  # type: ignore[attr-defined]
                raise ValueError(f"an {cls.__name__}'s {name} must be {wanted}, not {str(value)[:60]!r}")
            if name in RANK_FIELDS:
                bounded = [r for r in value if plausible_rank(r) is not None] if item else plausible_rank(value)
                object.__setattr__(self, name, bounded)
            elif name in SIZE_FIELDS:
                object.__setattr__(self, name, plausible_size(value))

    @classmethod
    def from_dict(cls, data: dict) -> Any:
        if unknown := set(data) - set(cls.__dataclass_fields__):  # type: ignore[attr-defined]
            raise ValueError(f"an {cls.__name__} has no field {sorted(unknown)[0][:60]!r}")
        try:
            return cls(**cls._typed(data))
        except TypeError as err:  # a missing field, or a nested value of the wrong shape
            raise ValueError(f"an {cls.__name__}: {err}") from None

    @classmethod
    def _typed(cls, data: dict) -> dict:
        """`data` with its nested values typed (none here; FrFinding types its culprits)."""
        return data

    def __bool__(self) -> bool:
        """Whether it says anything (a field set), as a dict's truth said: an empty one is left out of a digest."""
        return any(getattr(self, name) is not None for name in self.__dataclass_fields__)  # type: ignore[attr-defined]

    def get(self, key: str, default: Any = None) -> Any:
        value = getattr(self, key) if key in self.__dataclass_fields__ else None  # type: ignore[attr-defined]
        return default if value is None else value

    def to_dict(self) -> dict[str, Any]:
        out = {}
        for name in self.__dataclass_fields__:  # type: ignore[attr-defined]
            value = getattr(self, name)
            if isinstance(value, list):
                value = [asdict(x) if is_dataclass(x) and not isinstance(x, type) else x for x in value]
            if value is not None:
                out[name] = value
        return out


@dataclass(frozen=True, slots=True)
class FrCulprit:
    """One 'Culprit rank N; Error type: T' entry of the Flight Recorder analyzer's error msg: rank N differs, in T,
    from the rank the analyzer compared against (so only a small, complete minority of call mismatches names one)."""

    rank: int
    error_type: str


@dataclass(frozen=True, slots=True)
class FrFinding(TypedData):
    """The data of an fr-analysis ErrorEvent: one finding of the Flight Recorder analyzer's report, typed.

    Why: its judge (parsers/judges/logs/fr_report.py) read a dict through 28 key lookups that nothing checked."""

    finding: str  #: not-joined | errors | io-mismatch | missed-dumps | no-errors | gave-up
    analyzer: str = "flight-recorder"
    record_id: int | None = None  #: the analyzer's internal record id (its 'entry')
    pg_id: str | None = None
    pg_desc: str | None = None
    missing_ranks: list[int] | None = None  #: ranks whose dumps lack the collective
    expected_ranks: list[int] | None = None
    expected_count: int | None = None  #: the group's size: len(expected_ranks), or the count older output prints
    world_size: int | None = None
    state: str | None = None  #: the collective's state as printed (scheduled, started, completed)
    culprits: list[FrCulprit] | None = None  #: the error msg's 'Culprit rank' entries
    culprits_complete: bool = False  #: whether the error msg listed them all (not cut)
    error_msg: str | None = None
    input_sizes: str | None = None
    output_sizes: str | None = None
    total_input_numel: str | None = None
    total_output_numel: str | None = None
    frames: list[str] | None = None  #: the collective's stack, as printed
    verdict_line: str | None = None  #: the analyzer's verdict under it: missed-dumps or no-errors
    no_dump_ranks: list[int] | None = None  #: ranks the analyzer had no dump from

    @classmethod
    def _typed(cls, data: dict) -> dict:
        culprits = data.get("culprits")
        if culprits is None:
            return data
        return {**data, "culprits": [c if type(c) is FrCulprit else FrCulprit(**c) for c in culprits]}

    def to_dict(self) -> dict[str, Any]:
        out = TypedData.to_dict(self)
        if self.culprits is None:  # the reader's dict had it only beside culprits
            out.pop("culprits_complete")
        return out


@dataclass(frozen=True, slots=True)
class HorovodStall(TypedData):
    """The data of a horovod-stall ErrorEvent: one entry of Horovod's stall inspector report (a tensor and the
    ranks it lists as missing or ready), or one `<rank>: [t1, t2, ...]` listing line (its tensors, its rank
    missing). Why typed: its judge (parsers/judges/logs/horovod.py) told the two apart by which keys a dict held."""

    tensor: str | None = None  #: the entry's tensor (a listing line's first)
    tensors: list[str] | None = None  #: a listing line's tensors, the ones that rank has not submitted
    missing: list[int] | None = None  #: the ranks the entry lists as missing (a listing line: its rank)
    ready: list[int] | None = None  #: the ranks the entry lists as ready
    report: int = 0  #: which stall report of the log it belongs to (counted from 1; 0 before any)
    entry: int | None = None  #: its number among the log's entries (listing lines have none)


@dataclass(frozen=True, slots=True)
class WorkerReport(TypedData):
    """The data of what a launcher says of one of its workers (launcher-exit, launcher-signal, agent-signal,
    torchelastic's root-cause and child-failure entries, child-error-file): how it ended and who it was. Why
    typed: the judges that name the worker that died first (exceptions.py, observations.py) and the reader that
    maps local ranks to global ones (rank_log.py) read its exit code, local rank and pid by key."""

    launcher: str | None = None  #: who said it: torchrun (None), srun, mpirun, deepspeed, mp.spawn, paddle, ...
    exitcode: int | None = None  #: the worker's return code (negative: the signal that killed it)
    signal: int | str | None = None  #: the signal, by number or name as the line gives it
    signal_name: str | None = None  #: its description ('Segmentation fault')
    rank: int | None = None  #: the worker's global rank (torchelastic's table)
    local_rank: int | None = None
    pid: int | None = None
    worker: str | None = None  #: the worker's name (vLLM)
    tasks: list[int] | None = None  #: srun's task ids
    how: str | None = None  #: srun's word for the end ('Exited with exit code 1', 'Killed')
    first: bool | None = None  #: the launcher says this worker was the first to end (mpirun)
    raised: bool | None = None  #: mp.spawn: the worker raised; its traceback follows
    what: str | None = None  #: paddle's word on the end
    host: str | None = None  #: torchelastic's table: the short host name; fqdn the full one
    fqdn: str | None = None
    time: str | None = None
    attempt: int | None = None  #: torchelastic's restart attempt (the child error file's folder)


@dataclass(frozen=True, slots=True)
class RankStated(TypedData):
    """The data of a launch line that states a process's rank (rank-identity) or the job's size (job-size). Why
    typed: the rank-log reader takes the job's size and a pid's rank from it."""

    rank: int | None = None
    world_size: int | None = None
    local_rank: int | None = None
    launcher: str | None = None  #: who said it (lightning, torchrun, mpirun, deepspeed, accelerate, ...)


@dataclass(frozen=True, slots=True)
class C10dSaid(TypedData):
    """What every c10d line's data carries: the rank in its group that printed it, when the line's PG tag says
    (`[PG ID 1 ... Rank 3]`), which is a global rank only in the default group. The c10d shapes below add theirs."""

    group_rank: int | None = None


@dataclass(frozen=True, slots=True)
class CollectiveTimeout(C10dSaid):
    """The data of a watchdog's timeout (watchdog-timeout, failure-detected): the collective's sizes and how long it
    ran against its timeout, beside the event's seq and op. Why typed: the observations group a group's timeouts by
    the group rank each printed."""

    numel_in: int | None = None
    numel_out: int | None = None
    timeout_ms: int | None = None
    ran_ms: int | None = None


@dataclass(frozen=True, slots=True)
class DumpAsked(C10dSaid):
    """The data of a dump-signal: the rank whose timeout asked this one to dump its Flight Recorder, when the line
    names another rank."""

    from_rank: int | None = None


@dataclass(frozen=True, slots=True)
class CollectiveStack(C10dSaid):
    """The data of a collective-stack: c10d's stack of the failed collective, as (function, file, line) frames the
    rank-log reader fills from the lines below its heading."""

    frames: list[tuple] = field(default_factory=list)


@dataclass(frozen=True, slots=True)
class StatedTimeout(C10dSaid):
    """The data of a line that states a timeout: a group's TIMEOUT(ms) option (pg-timeout), or monitored_barrier's
    report of the ranks that did not arrive within it (barrier-absent). Why typed: the short-timeout judge compares
    the stated timeouts, and the named judge names the absent ranks."""

    timeout_ms: int | None = None
    absent: list[int] | None = None  #: the ranks monitored_barrier says did not arrive


@dataclass(frozen=True, slots=True)
class DesyncReport(C10dSaid):
    """The data of a line of c10d's desync debug report: the ranks that lag and how (desync-lagging), or the ranks a
    snapshot saw last start or finish an op (desync-state). `collective` is the report's own count from 1, no
    SeqNum."""

    lagging: list[int] | None = None
    ranks: list[int] | None = None
    state: str | None = None  #: never-joined | inside | finished-before (lagging); started | finished (state)
    collective: int | None = None
    last_op: str | None = None


@dataclass(frozen=True, slots=True)
class CollectiveSide(TypedData):
    """One rank's side of ProcessGroupWrapper's check: the collective it ran (op, SequenceNumber, elements)."""

    rank: int | None = None
    op: str | None = None
    seq: int | None = None
    numel: int | None = None


@dataclass(frozen=True, slots=True)
class Fingerprint(C10dSaid):
    """The data of ProcessGroupWrapper's lines: a collective a rank starts (c10d-fingerprint: its elements, beside
    the event's seq and op) or a mismatch it found (collective-mismatch: each side, and the aspects torch 2.x
    names). Why typed: the tables judge takes each side as a signature at its position."""

    numel: int | None = None
    sides: list[CollectiveSide] | None = None
    aspects: str | None = None

    @classmethod
    def _typed(cls, data: dict) -> dict:
        sides = data.get("sides")
        if not isinstance(sides, list):
            return data
        return {**data, "sides": [CollectiveSide.from_dict(s) if isinstance(s, dict) else s for s in sides]}


@dataclass(frozen=True, slots=True)
class NcclFailure(C10dSaid):
    """The data of an nccl-error or a python-exception: what c10d (or nccl-tests) said of the error, and NCCL's own
    reason, which the line after c10d's 'Last error:' gives (filled by parsers/readers/last_error.py). Why typed:
    the observations put NCCL's reason first, since 'invalid usage' is what c10d made of it."""

    type: str | None = None  #: the exception's type (python-exception)
    nccl_version: str | None = None
    where: str | None = None  #: the source file:line that raised (c10d's 'NCCL error in:', nccl-tests')
    code: str | None = None  #: NCCL's result code (ncclInternalError, ...)
    what: str | None = None  #: nccl-tests: what the call returned
    test: bool | None = None  #: said by nccl-tests
    last_error: str | None = None  #: NCCL's own reason


@dataclass(frozen=True, slots=True)
class Truncated(TypedData):
    """The data of a size-mismatch: NCCL's truncated-message or IB size-mismatch warning, with its byte counts.
    Why typed: the named judge groups the peer reports by these sizes, and the peer-address judge takes the side
    that printed it for which of the reporter's connections to follow."""

    side: str | None = None  #: 'receiver' or 'sender': which side printed it
    sent: int | None = None  #: bytes the sending side sent
    posted: int | None = None  #: bytes the receiving side posted


@dataclass(frozen=True, slots=True)
class NetAddresses(TypedData):
    """The data of a net-address: the addresses a process says it uses (NCCL's 'NET/Socket : Using ...'), and their
    interfaces. Why typed: the peer-address judge books who each address is."""

    addresses: list[str] | None = None
    interfaces: list[str] | None = None


@dataclass(frozen=True, slots=True)
class LocalPeer(TypedData):
    """The data of a peer-closed: the local rank of the peer whose proxy connection went away."""

    local_rank: int | None = None


@dataclass(frozen=True, slots=True)
class TimelinePath(TypedData):
    """The data of a horovod-timeline-error: the HOROVOD_TIMELINE path Horovod could not write, and whether it names
    a directory (the setting is then the cause)."""

    path: str | None = None
    directory: bool | None = None


@dataclass(frozen=True, slots=True)
class LineOnly(TypedData):
    """The data of a kind whose line says nothing beyond the event's common fields (its message, op, peer address):
    gloo's timeouts and errors, NCCL's WARN lines and IB completion errors. Typed all the same, so that no event
    carries a dict and a digest cannot give one anything."""


@dataclass(frozen=True, slots=True)
class Heartbeat(C10dSaid):
    """The data of a heartbeat: c10d's heartbeat monitor found the watchdog stuck, with the works still pending when
    the line counts them."""

    pending_works: int | None = None


@dataclass(frozen=True, slots=True)
class StoreWait(C10dSaid):
    """The data of a store-timeout: how many clients joined the store (based) barrier of how many expected, within
    how many seconds; or, for a rank's wait for another's NCCL unique id, the rank it waited for, the key and the
    store's reason."""

    joined: int | None = None
    expected: int | None = None  #: the clients the store waited for (a group's size)
    seconds: int | None = None
    waits_for: int | None = None  #: the rank whose ncclUniqueId this rank waited for
    key: str | None = None
    why: str | None = None


@dataclass(frozen=True, slots=True)
class NetFailure(C10dSaid):
    """The data of a lost or failed connection (net-error, connection-reset, connection-closed): what the network
    plugin or socket call said (`NET/<net> ... rc`, `socketProgress...: Call to <call> failed : <error>`), or which
    launcher reported the loss (mpirun)."""

    net: str | None = None  #: the NCCL net plugin that failed (NET/<net>)
    rc: int | None = None  #: its return code
    call: str | None = None  #: the socket call that failed (recv, send, ...)
    error: str | None = None  #: what the plugin or the call said
    launcher: str | None = None  #: who reported a lost peer (mpirun)


@dataclass(frozen=True, slots=True)
class TorchFrame(C10dSaid):
    """The data of a python-frame: a torch/distributed frame of a traceback (function, file, line)."""

    function: str | None = None
    file: str | None = None
    line: int | None = None


@dataclass(frozen=True, slots=True)
class BarrierWait(C10dSaid):
    """The data of a barrier-wait: the rank (monitored_barrier's reporter) whose answer this rank lost its wait for."""

    peer: int | None = None


@dataclass(frozen=True, slots=True)
class HorovodLine(TypedData):
    """The data of a Horovod line at a level (horovod-log, horovod-error): its level letter and where it was logged
    (file:line)."""

    level: str | None = None
    where: str | None = None


@dataclass(frozen=True, slots=True)
class DeviceFault(TypedData):
    """The data of a host or CUDA fault a log carries (xid, gpu-lost, nvrm, pcie-error, cuda-error,
    cuda-driver-mismatch): what a pasted kernel line names (Xid, PCI address, pid, process, the driver's words), or
    what nccl-tests said of a CUDA call that failed (what, where, test)."""

    xid: int | None = None
    pci: str | None = None  #: the GPU's or port's PCI address
    pid: int | None = None  #: the process the Xid names
    process: str | None = None  #: its name
    detail: str | None = None  #: the driver's message (nvrm) or what follows a lost handle
    what: str | None = None  #: the CUDA error's text
    where: str | None = None  #: nccl-tests: the source file:line that failed
    test: bool | None = None  #: said by nccl-tests


@dataclass(frozen=True, slots=True)
class FailureTrail(TypedData):
    """The data of a test-failure: nccl-tests' trail of a failure (the source file:line it names)."""

    where: str | None = None
    trail: bool | None = None


@dataclass(frozen=True, slots=True)
class CommAborted(TypedData):
    """The data of an nccl-abort: NCCL's `Abort COMPLETE` of a communicator (its pointer, this rank in it, its
    size)."""

    comm_ptr: str | None = None
    comm_rank: int | None = None
    nranks: int | None = None


@dataclass(frozen=True, slots=True)
class NcclReason(TypedData):
    """The data of an nccl-last-error: the kind of the c10d error NCCL's reason explains and that error's line."""

    explains: str | None = None  #: an ErrorKind's text (nccl-error, python-exception)
    line: int | None = None


@dataclass(frozen=True, slots=True)
class FatalError(TypedData):
    """The data of a python-fatal: what faulthandler's `Fatal Python error:` names (Segmentation fault, Aborted)."""

    error: str | None = None


@dataclass(frozen=True, slots=True)
class CrashSignal(TypedData):
    """The data of a process-signal: which crash handler reported it (open-mpi, ucx) and the signal."""

    handler: str | None = None
    signal: int | None = None
    signal_name: str | None = None


@dataclass(frozen=True, slots=True)
class UnusedParameters(TypedData):
    """The data of a ddp-unused-parameters: what DDP's reducer listed (parameters or parameter indices) and the
    list as it named them."""

    listed: str | None = None
    named: str | None = None


_WORKER_KINDS = (ErrorKind.LAUNCHER_EXIT, ErrorKind.LAUNCHER_SIGNAL, ErrorKind.AGENT_SIGNAL, ErrorKind.ROOT_CAUSE,
                 ErrorKind.CHILD_FAILURE, ErrorKind.CHILD_ERROR_FILE)
#: c10d lines that say only their level or what happened: their data is the group rank that printed them
_C10D_PLAIN_KINDS = (ErrorKind.C10D_ERROR, ErrorKind.C10D_WARNING, ErrorKind.C10D_INFO, ErrorKind.C10D_TEARDOWN,
                     ErrorKind.TERMINATE, ErrorKind.FR_DISABLED)
_LINE_ONLY_KINDS = (ErrorKind.GLOO_TIMEOUT, ErrorKind.GLOO_ERROR, ErrorKind.IB_COMPLETION, ErrorKind.NCCL_TIMEOUT,
                    ErrorKind.NCCL_WARN)
_HOST_KINDS = (ErrorKind.XID, ErrorKind.GPU_LOST, ErrorKind.NVRM, ErrorKind.PCIE_ERROR, ErrorKind.CUDA_ERROR,
               ErrorKind.CUDA_DRIVER_MISMATCH)
_NET_KINDS = (ErrorKind.NET_ERROR, ErrorKind.CONNECTION_RESET, ErrorKind.CONNECTION_CLOSED)

#: every error kind's data type: kind -> its data's type (built from a dict where one is given)
TYPED_DATA: dict[ErrorKind, Any] = {ErrorKind.FR_ANALYSIS: FrFinding, ErrorKind.HOROVOD_STALL: HorovodStall,
                                    **dict.fromkeys(_WORKER_KINDS, WorkerReport),
                                    ErrorKind.RANK_IDENTITY: RankStated, ErrorKind.JOB_SIZE: RankStated,
                                    ErrorKind.WATCHDOG_TIMEOUT: CollectiveTimeout,
                                    ErrorKind.FAILURE_DETECTED: CollectiveTimeout, ErrorKind.DUMP_SIGNAL: DumpAsked,
                                    ErrorKind.COLLECTIVE_STACK: CollectiveStack, ErrorKind.PG_TIMEOUT: StatedTimeout,
                                    ErrorKind.BARRIER_ABSENT: StatedTimeout, ErrorKind.DESYNC_LAGGING: DesyncReport,
                                    ErrorKind.DESYNC_STATE: DesyncReport, ErrorKind.C10D_FINGERPRINT: Fingerprint,
                                    ErrorKind.COLLECTIVE_MISMATCH: Fingerprint, ErrorKind.NCCL_ERROR: NcclFailure,
                                    ErrorKind.PYTHON_EXCEPTION: NcclFailure, ErrorKind.SIZE_MISMATCH: Truncated,
                                    ErrorKind.NET_ADDRESS: NetAddresses, ErrorKind.PEER_CLOSED: LocalPeer,
                                    ErrorKind.HOROVOD_TIMELINE_ERROR: TimelinePath,
                                    **dict.fromkeys(_C10D_PLAIN_KINDS, C10dSaid),
                                    **dict.fromkeys(_LINE_ONLY_KINDS, LineOnly),
                                    **dict.fromkeys(_HOST_KINDS, DeviceFault),
                                    **dict.fromkeys(_NET_KINDS, NetFailure),
                                    ErrorKind.HEARTBEAT: Heartbeat, ErrorKind.STORE_TIMEOUT: StoreWait,
                                    ErrorKind.PYTHON_FRAME: TorchFrame, ErrorKind.BARRIER_WAIT: BarrierWait,
                                    ErrorKind.HOROVOD_STALL_WARNING: HorovodStall,
                                    ErrorKind.HOROVOD_LOG: HorovodLine, ErrorKind.HOROVOD_ERROR: HorovodLine,
                                    ErrorKind.TEST_FAILURE: FailureTrail, ErrorKind.NCCL_ABORT: CommAborted,
                                    ErrorKind.NCCL_LAST_ERROR: NcclReason, ErrorKind.PYTHON_FATAL: FatalError,
                                    ErrorKind.PROCESS_SIGNAL: CrashSignal,
                                    ErrorKind.DDP_UNUSED_PARAMETERS: UnusedParameters}
#: every type a typed data holds (what a digest may rebuild besides the events)
DATA_TYPES: tuple[type, ...] = (*dict.fromkeys(TYPED_DATA.values()), FrCulprit, CollectiveSide)


def group_rank(event: ErrorEvent) -> int | None:
    """The rank in its group that printed an event, where a c10d line's PG tag says it (C10dSaid.group_rank)."""
    data = event.data
    return data.group_rank if isinstance(data, C10dSaid) else None


#: ErrorEvent kinds that record what a line said without saying anything failed (an `[I ...]`
#: c10d line such as "watchdog thread started", the group's TIMEOUT(ms) option, a collective a
#: rank starts as ProcessGroupWrapper logs it (c10d-fingerprint), the watchdog's note that the Flight
#: Recorder is off (fr-disabled), an NVRM driver
#: message that matched no fault such as "loading NVIDIA UNIX Open Kernel Module", torch's teardown warning that
#: destroy_process_group() was not called, printed by ranks that finished, the addresses NCCL says a process uses
#: (net-address)): read and kept, never weighed as an error.
INFO_KINDS = frozenset({ErrorKind.C10D_INFO, ErrorKind.PG_TIMEOUT, ErrorKind.NVRM, ErrorKind.C10D_FINGERPRINT,
                        ErrorKind.FR_DISABLED, ErrorKind.COLLECTIVE_STACK, ErrorKind.CHILD_ERROR_FILE,
                        ErrorKind.HOROVOD_LOG, ErrorKind.C10D_TEARDOWN, ErrorKind.HOROVOD_STALL,
                        ErrorKind.HOROVOD_STALL_WARNING, ErrorKind.RANK_IDENTITY, ErrorKind.JOB_SIZE,
                        ErrorKind.NET_ADDRESS})

#: a watchdog's own word that a rank waited in one collective of its group, at a position (SeqNum)
TIMEOUT_KINDS = frozenset({ErrorKind.WATCHDOG_TIMEOUT, ErrorKind.FAILURE_DETECTED})
#: errors a rank prints while it waits on a peer that is gone or late (timeouts, closed or reset connections, a
#: monitored_barrier that names the ranks that did not arrive, or a rank that lost its wait for that report)
WAIT_ERRORS = TIMEOUT_KINDS | {ErrorKind.GLOO_TIMEOUT, ErrorKind.CONNECTION_CLOSED, ErrorKind.CONNECTION_RESET,
                               ErrorKind.NCCL_TIMEOUT, ErrorKind.IB_COMPLETION, ErrorKind.NET_ERROR,
                               ErrorKind.BARRIER_ABSENT, ErrorKind.BARRIER_WAIT}


#: kinds that warn and say nothing failed: the judges never take one for an error (issue 39 item 5: a c10d `[W ...]`
#: line is never a rank's first error), and neither does the scale path (a warning every gloo rank prints, "Unable
#: to resolve hostname", made every rank odd, and the focus read every host)
WARNING_KINDS = frozenset({ErrorKind.C10D_WARNING})


#: what is printed because a process waited, stopped or was stopped, its own or another rank's, never a fault of the
#: process by itself: c10d's Flight Recorder dump request ("Received a dump signal due to a collective timeout from
#: rank 3": every rank of a job that timed out prints it; as an own error it made every rank of a replicated
#: issue26/order odd, 1,032 of 1,032, and the digest path read every raw file, at 100,000 ranks 20 GB, killed for
#: memory), a launcher's report of an exit or a signal, an agent's death signal, NCCL's abort, a peer that closed
#: its connection, the store's timeout, nccl-tests' trail of a failure, Horovod's timeline error and the Flight
#: Recorder analyzer's report. One set: the scale path's own errors (`own_error`) and the same-fault-on-one-host rule
#: (`parsers.judges.same_fault`) each kept their own, and the two differed (the host rule's had no dump signal, the
#: scale path's nothing else). Kinds already information (INFO_KINDS) or waits (WAIT_ERRORS) are not repeated here.
AFTERMATH_OF_WAIT = frozenset({ErrorKind.DUMP_SIGNAL, ErrorKind.LAUNCHER_EXIT, ErrorKind.LAUNCHER_SIGNAL,
                               ErrorKind.AGENT_SIGNAL, ErrorKind.NCCL_ABORT, ErrorKind.PEER_CLOSED,
                               ErrorKind.TEST_FAILURE, ErrorKind.HOROVOD_TIMELINE_ERROR, ErrorKind.FR_ANALYSIS,
                               ErrorKind.STORE_TIMEOUT})


def own_error(event: object) -> bool:
    """An error a process reports of itself: an ErrorEvent that is no mere information (INFO_KINDS), no warning
    (WARNING_KINDS), no wait on a peer (WAIT_ERRORS) and no aftermath of one (AFTERMATH_OF_WAIT). What makes a rank
    odd by itself, whatever the others do (parsers.scale.digest's flags and odd ones out, and the raw reads digest
    first and the focus choose from them)."""
    return type(event) is ErrorEvent and event.kind not in INFO_KINDS and event.kind not in WARNING_KINDS \
        and event.kind not in WAIT_ERRORS and event.kind not in AFTERMATH_OF_WAIT


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


#: states in which a process cannot run (stated once, with the rules that read them, in `parsers.model.states`)
FROZEN_STATES = states.FROZEN_STATES


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
        return states.frozen(self)

    @property
    def stopped(self) -> bool:
        return states.stopped(self)

    @property
    def gone(self) -> bool:
        return states.gone(self)

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
    #: kernel logs: line number -> its stamp as printed (parsers.model.kernel_time decodes it), beside its note
    kernel_stamps: dict = field(default_factory=dict)
    exceptions: list = field(default_factory=list)  #: parsers.readers.exception.PyException, in order
    samples: StackSamples | None = None  #: parsers.model.samples.StackSamples (stack samples over seconds), else None
    #: parsers.steps.series.StepSeries (forensics.arm()'s per-step times of one rank), else None
    step_series: Any = None
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


#: what a file may say of its own process's fault, each the name of the flag it sets on that rank
FAULT_FLAGS = ("exception", "error")


def own_faults(parsed: Parsed) -> Iterator[tuple[str, Any]]:
    """What one file says its process did wrong by itself: ('exception', each Python exception), ('error', each
    `own_error` event), in that order.

    Why one place: a rank's 'exception' and 'error' flags on its host's digest, the job-level files digest first
    reads raw, and the processes the focus reads for a job-level file each said 'its exceptions, or an error of
    its own' in their own code; a kind of fault added to one (or an error kind moved to the waits) was not read
    at 100,000 ranks where the judges saw it at 8."""
    for x in parsed.exceptions:
        yield "exception", x
    for e in parsed.events:
        if own_error(e):
            yield "error", e


def fault_flags(parsed: Parsed) -> list[str]:
    """The FAULT_FLAGS `own_faults` finds in one file (each once, in FAULT_FLAGS' order)."""
    found = {flag for flag, _ in own_faults(parsed)}
    return [flag for flag in FAULT_FLAGS if flag in found]
