"""What judges return: typed findings (suspects with citations, wait edges, observations), and the verdict.

One judge protocol: every judge is a pure function of the evidence that returns `Findings`
(its source family, suspects, wait edges, observations, sections). Nothing here is text to be
parsed back: a reason is a `ReasonClass`, a citation knows its file, line and tool, a wait edge
its scope and op, and how two findings relate (one agrees with, or explains, another) is a
field. The arbiter (parsers/pipeline/merge.py) reads these; presentation reads the `Verdict` only.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from enum import Enum
from typing import TYPE_CHECKING, Any, Protocol, Self

from parsers.model.events import UNKNOWN_HOST, ErrorKind

#: type-only: each module of ours named here imports the model, so a runtime import would be a circle (and, for the
#: judges', knowledge's and stack tree's types, an upward one): the model names their types, it never runs them
if TYPE_CHECKING:
    import networkx as nx  # not ours: kept out of the model's import; the judges that build graphs import it

    from parsers.gather.evidence import Evidence
    from parsers.judges.hosts import HostReport
    from parsers.judges.logs import LogAnalysis
    from parsers.judges.p2p import P2PWaits
    from parsers.judges.progress import ProgressDecision
    from parsers.judges.slowness import Slowness
    from parsers.knowledge import KnowledgeBase
    from parsers.stacks.tree import StackNode


class ReasonClass(str, Enum):
    """Why a rank is a suspect. Each class knows whether it is an observed fact about the
    process or host (stopped, gone, a host fault) or an inferred claim (the others wait on
    it), and the confidence a judge gives it when nothing raises or lowers it.

    Observed facts head a merged suspect: they say *why*, where claims only say *that*.
    A str Enum, so JSON and comparisons with the plain names keep working.
    """

    observed: bool
    default_confidence: float
    text: str

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
    NAMED_ABSENT = ("named-absent", False, 0.80, "a peer's own error names it as the rank that did not arrive")
    NAMED_PEER = ("named-peer", False, 0.70, "another rank lost its connection to an address the files pair with "
                  "this rank")
    OUTSIDE = ("outside-collective", False, 0.80, "in no collective while the others wait")
    DATA_WAIT = ("data-wait", False, 0.85, "its main thread waits for its DataLoader workers while the others wait")
    MISMATCH = ("mismatch", False, 0.60, "called a different collective than its peers")
    WRONG_PEER = ("wrong-peer", False, 0.85, "waits on a send or receive its peer never posts, while another rank's "
                  "op to it goes unanswered: it names the wrong peer")
    UNANSWERED = ("unanswered", False, 0.75, "waits in a send that no rank of the job answers: no rank is in a "
                  "receive, and the others wait in a collective it has not joined")
    FR_MISSING = ("fr-missing", False, 0.60, "the Flight Recorder analyzer finds its dump lacks a collective the "
                  "others scheduled")
    FR_CULPRIT = ("fr-culprit", False, 0.50, "the Flight Recorder analyzer finds its collective differs from the "
                  "reference rank's")
    WAIT_ROOT = ("wait-root", False, 0.75, "the root of the wait-for graph")
    MISSING_LINE = ("missing-line", False, 0.70, "never logged the operation the others wait in")
    WENT_AHEAD = ("went-ahead", False, 0.75, "went ahead of the others in a group: called a collective they did not "
                  "reach, or skipped one they call")
    NO_DUMP = ("no-dump", False, 0.60, "left no evidence where the others did")
    ABSENT = ("absent", False, 0.60, "no process on any collected host")
    STALLED = ("stalled-in-collective", False, 0.70, "its peers wait for data from it in a collective")
    GPU_QUEUED = ("gpu-queued", True, 0.85, "its collective was enqueued but never started on the GPU")
    FROZEN = ("frozen", False, 0.90, "its recorder heartbeat stopped: its process no longer runs")
    NO_RECORDER_STATE = ("no-recorder-state", False, 0.70, "left no recorder state while its peers wait on it")
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
        if isinstance(name, ReasonClass):
            return name
        return _REASON_CLASS_OF.get(name)


#: each class by its name (its value), for ReasonClass.of
_REASON_CLASS_OF: dict[str, ReasonClass] = {rc.value: rc for rc in ReasonClass}


def is_observed(reason_class: "str | ReasonClass") -> bool:
    """True for facts about the process or host itself (they lead a merged suspect)."""
    rc = ReasonClass.of(reason_class)
    return bool(rc and rc.observed)


_R = ReasonClass
#: how findings about one rank relate: cause -> the findings it explains (it comes first causally), so the
#: arbiter lists them under it as consequences, not as rivals.
EXPLAINS: dict[ReasonClass, set[ReasonClass]] = {
    #: ... and its own exit: a rank that called another collective than its peers, finished it and exited (0, or
    #: aborted by NCCL) exited because of the call (issue 39 item 3: the exit is listed under the cause)
    _R.MISMATCH: {_R.GPU_QUEUED, _R.OUTSIDE, _R.BEHIND, _R.MISSING_LINE, _R.WENT_AHEAD, _R.NO_DUMP, _R.STALLED,
                  _R.WAIT_ROOT, _R.STALLED_FIRST, _R.SILENT, _R.FR_MISSING, _R.WAIT_CYCLE, _R.RAS_BEHIND, _R.EXITED,
                  _R.NO_RECORDER_STATE},
    _R.WRONG_PEER: {_R.GPU_QUEUED, _R.OUTSIDE, _R.BEHIND, _R.MISSING_LINE, _R.WENT_AHEAD, _R.NO_DUMP, _R.STALLED,
                    _R.WAIT_ROOT, _R.STALLED_FIRST, _R.SILENT, _R.FR_MISSING, _R.WAIT_CYCLE, _R.RAS_BEHIND,
                    _R.MISMATCH},
    #: a send nobody receives is why it never joined the collective the others wait in
    _R.UNANSWERED: {_R.OUTSIDE, _R.BEHIND, _R.MISSING_LINE, _R.WENT_AHEAD, _R.NO_DUMP, _R.STALLED, _R.WAIT_ROOT,
                    _R.STALLED_FIRST, _R.SILENT, _R.FR_MISSING, _R.WAIT_CYCLE, _R.RAS_BEHIND},
    _R.RAISED: {_R.ABSENT, _R.NO_DUMP, _R.MISSING_LINE, _R.SILENT, _R.WAIT_ROOT, _R.RAS_MISSING, _R.RAS_DEAD,
                _R.LOST_PEER, _R.ERROR_FIRST, _R.NAMED_ABSENT, _R.NAMED_PEER},
    #: a peer names the rank as absent: that is why the rank is silent, left no line or is the first error's subject
    _R.NAMED_ABSENT: {_R.SILENT, _R.MISSING_LINE, _R.NO_DUMP, _R.ERROR_FIRST},
    #: the peer a lost connection names: why it is silent, left no line or dump, and why its neighbours lost it
    _R.NAMED_PEER: {_R.SILENT, _R.MISSING_LINE, _R.NO_DUMP, _R.ERROR_FIRST, _R.LOST_PEER},
}
#: claims that mean "the others wait for this rank" rather than a fact about its process ('gpu-queued' is
#: not one: such a rank waits in synchronize by nature, and is never demoted for it)
ROOT_CLAIMS = {_R.OUTSIDE, _R.WAIT_ROOT, _R.WAIT_CYCLE, _R.MISSING_LINE, _R.BEHIND, _R.RAS_BEHIND, _R.SILENT,
               _R.STALLED, _R.STALLED_FIRST}
#: readings of one moment that only a hang makes a culprit ('the others wait on N', 'N went ahead', 'in no
#: collective', 'never started on its GPU', 'waits on its DataLoader'): with no time to say the job hangs, each
#: is a lead, never a hang culprit (WENT_AHEAD is no ROOT_CLAIM: the rank ahead waits by nature)
SNAPSHOT_CLAIMS = ROOT_CLAIMS | {_R.WENT_AHEAD, _R.GPU_QUEUED, _R.DATA_WAIT, _R.NEVER_JOINED, _R.NO_RECORDER_STATE,
                                 _R.UNANSWERED}
#: facts that stand whether or not the job still runs; every other class is a reading of one
#: snapshot ('rank 5 has not entered the op yet', 'its kernel has not started') that a running job makes often
STANDING_IN_A_RUNNING_JOB = {_R.HOST_FAULT, _R.KNOWN_ERROR, _R.STOPPED, _R.EXITED, _R.MISSING, _R.KERNEL_WAIT,
                             _R.RAISED}
#: absences said of the process itself (looked for on every collected host; NCCL RAS has no answer from it),
#: which head absences said of what it left behind (no dump, no recorder state, no log line) about one rank
PROCESS_ABSENCE = {_R.ABSENT, _R.RAS_MISSING, _R.RAS_DEAD}
ARTIFACT_ABSENCE = {_R.NO_DUMP, _R.NO_RECORDER_STATE, _R.MISSING_LINE, _R.SILENT}
#: claims that rest on a rank's absence alone
ABSENCE_CLAIMS = {_R.ABSENT, _R.SILENT}

#: the least confidence at which a suspect is named as the culprit (below: a lead, listed only)
CULPRIT_MIN_CONFIDENCE = 0.5


class Citation(str):
    """One line of evidence: what it shows (the text), typed with where it was read and by what.

    A str so that it reads, sorts and compares as its text; `file`, `line` and `tool` say where it
    comes from, so no code needs to find them in the words; `tagged` says that its words already end in
    their source ('... [/proc]', '... [trace.log:12]'), so presentation adds no tag of its own.
    """

    file: str | None
    line: int | None
    tool: str | None
    tagged: bool

    def __new__(cls, text: str, file: str | None = None, line: int | None = None,
                tool: str | None = None, tagged: bool | None = None) -> Self:
        obj = str.__new__(cls, text)
        obj.file, obj.line = file, line
        obj.tool = tool if tool is not None else getattr(text, "tool", None)
        obj.tagged = tagged if tagged is not None else getattr(text, "tagged", False)
        if file is None and isinstance(text, Citation):
            obj.file, obj.line = text.file, text.line
        return obj

    def __reduce__(self) -> tuple[type, tuple[object, ...]]:  # copy and pickle make it again with its fields
        return type(self), (str(self), self.file, self.line, self.tool, self.tagged)

    def to_dict(self) -> dict[str, Any]:
        return {"shows": str(self), "file": self.file, "line": self.line, "tool": self.tool}


class HostNote(str):
    """One host's line of missing evidence ('host node07: py-spy: failed'), typed with the host and the
    note, so presentation can fold the hosts that say the same thing without reading the words back."""

    host: str
    note: str

    def __new__(cls, host: str, note: str) -> "HostNote":
        obj = str.__new__(cls, f"host {host}: {note}")
        obj.host, obj.note = host, note
        return obj

    def __reduce__(self) -> tuple[type, tuple[object, ...]]:  # copy and pickle make it again with its fields
        return type(self), (self.host, self.note)


class RankNote(str):
    """One rank's line of missing evidence ('rank 3 (node07 pid 412): gdb: timeout'), typed with the rank,
    its host and pid and the note, so presentation folds the ranks that say the same thing (512 ranks
    whose py-spy timed out are one line) without reading the words back."""

    rank: int | None
    host: str | None
    pid: int | None
    note: str

    def __new__(cls, rank: int | None, host: str | None, pid: int | None, note: str) -> "RankNote":
        obj = str.__new__(cls, f"rank {rank} ({host} pid {pid}): {note}")
        obj.rank, obj.host, obj.pid, obj.note = rank, host, pid, note
        return obj

    def __reduce__(self) -> tuple[type, tuple[object, ...]]:  # copy and pickle make it again with its fields
        return type(self), (self.rank, self.host, self.pid, self.note)


def cite(text: str, tool: str | None = None, file: str | None = None, line: int | None = None,
         tagged: bool = False) -> Citation:
    """A citation of `tool` (e.g. '/proc', 'py-spy', 'launcher record') at file:line; `tagged`: its words end in
    their source already."""
    return Citation(text, file=file, line=line, tool=tool, tagged=tagged)


class Reason(str):
    """A suspect's reason whose words name its rank first ('rank 3 never logged ...'): a str that reads as its
    words, typed with that rank and the words after it (`predicate`), so a line that already shows the rank's
    label says the predicate only, and no code looks for the rank in the words."""

    rank: int
    predicate: str

    def __new__(cls, rank: int, predicate: str) -> "Reason":
        obj = str.__new__(cls, f"rank {rank} {predicate}")
        obj.rank, obj.predicate = rank, predicate
        return obj

    def __reduce__(self) -> tuple[type, tuple[object, ...]]:  # copy and pickle make it again from its fields
        return type(self), (self.rank, self.predicate)


def of_rank(rank: int, predicate: str) -> Reason:
    """'rank 3 ' + `predicate`, typed (Reason): the reason names its rank first."""
    return Reason(rank, predicate)


#: independent kinds of evidence: a culprit two of them support is surer than one one of them does
SOURCES = ("stacks", "proc", "recorder", "logs", "dumps", "ras", "hosts", "exceptions", "launcher", "timing")


@dataclass
class Demotion:
    """Why a root claim lost weight: the rank waits itself (`edge`: on whom, in which scope and op), or its main
    thread is blocked. `said` is its words, empty here: presentation (forensics.report.words) writes them."""

    waits_on: int | None = None
    edge: "WaitEdge | None" = None  #: the typed wait edge out of the rank (global ranks)
    blocked: str | None = None  #: what the main thread is blocked in, where that is the reason
    unproven: bool = False  #: no time says the job hangs: a wait read from where logs stop is a lead only
    cycle: tuple[int, ...] = ()  #: the deadlock's members, where the verdict is a deadlock this claim is outside of
    said: str = ""

    def describe(self) -> str:
        return self.said


@dataclass
class Suspect:
    """A rank the evidence points at, why, and how sure we are (0..1).

    `evidence` holds the judge's own citations (`Citation`, or plain text a judge has not typed yet);
    `agreeing` the other judges' findings about the same rank (their `source` is what makes agreement
    independent); `consequences` the findings this one explains (the arbiter's explanation links).
    """

    rank: int | None
    host: str | None
    pid: int | None
    reason_class: ReasonClass  #: always the enum: a judge that gives a plain str is refused (TypeError)
    reason: str  #: one human sentence (a `Reason` where it names its rank first)
    confidence: float
    evidence: list[str] = field(default_factory=list)
    source: str = ""  #: which kind of evidence the judge read (SOURCES); set by the judge protocol
    agreeing: list["Suspect"] = field(default_factory=list)
    demotion: Demotion | None = None
    consequences: list["Suspect"] = field(default_factory=list)
    action: str | None = None  #: the recommended action, where the knowledge base gives one
    why: str | None = None  #: one clause of its own evidence that says why (e.g. the thread that holds its lock)

    def __post_init__(self) -> None:
        if not isinstance(self.reason_class, ReasonClass):  # typed at every creation site, never a name
            raise TypeError(f"reason_class must be a ReasonClass, not {self.reason_class!r}")

    def sort_key(self) -> tuple[float, int, int]:
        """Most likely first; among equals, the one more sources support, then the lower rank."""
        return (-self.confidence, -len(self.sources), self.rank if self.rank is not None else 1 << 30)

    @property
    def sources(self) -> list[str]:
        """The independent kinds of evidence that support this rank, in the order they spoke."""
        out: list[str] = []
        for s in [self, *self.agreeing, *self.consequences]:
            if s.source and s.source not in out:
                out.append(s.source)
        return out

    @property
    def label(self) -> str:
        who = f"rank {self.rank}" if self.rank is not None else "a process"
        host = "host not in the evidence" if self.host == UNKNOWN_HOST else self.host  # never the placeholder itself
        where = (", " if host != self.host and self.pid else " ").join(
            x for x in (host, f"pid {self.pid}" if self.pid else None) if x)
        return f"{who} ({where})" if where else who

    @property
    def names_own_rank(self) -> bool:
        """Whether its reason names this suspect's own rank first (typed where the reason was made: `of_rank`)."""
        return isinstance(self.reason, Reason) and self.rank is not None and self.reason.rank == self.rank

    def to_dict(self) -> dict[str, Any]:
        return {
            "rank": self.rank,
            "host": self.host,
            "pid": self.pid,
            "reason_class": str(self.reason_class),
            "observed": is_observed(self.reason_class),
            "reason": self.reason,
            "confidence": round(self.confidence, 3),
            "evidence": [str(e) for e in self.evidence],
            "citations": [e.to_dict() if isinstance(e, Citation) else {"shows": e} for e in self.evidence],
            "source": self.source,
            "sources": self.sources,
            "agreeing": [{"reason_class": str(a.reason_class), "reason": a.reason, "source": a.source,
                          "confidence": round(a.confidence, 3)} for a in self.agreeing],
            "demoted": self.demotion.describe() if self.demotion else None,
            "action": self.action,
            "why": self.why,
            "consequences": [{"rank": c.rank, "reason_class": str(c.reason_class), "reason": c.reason}
                             for c in self.consequences],
        }


@dataclass(frozen=True)
class HostFact:
    """A host the host judge would exclude or suspects, and the first finding that says why."""

    host: str | None  #: None: the host of these lines, which none names
    status: str  #: 'exclude' | 'suspect'
    title: str  #: the knowledge base entry's title
    citation: Citation | None = None  #: the line it was read at (file, line)


@dataclass(frozen=True)
class KnownFact:
    """A known failure the knowledge base explains, found in a log, with no host to blame: a fault of the code
    or of the job's set-up (DDP's unused parameters, two ranks on one GPU, an OOM), or a symptom whose meaning
    it says (a flushed InfiniBand work request follows another error). Hosts to blame are HostFacts."""

    title: str  #: the entry's title
    meaning: str  #: the entry's meaning, as the knowledge base words it
    action: str  #: what to do, as the knowledge base words it
    symptom: bool  #: a line that follows another error: its meaning said, no action taken on it alone
    who: str | None = None  #: whose line: 'rank 3', 'pid 12', or None where no line says
    host: str | None = None
    peer: str | None = None  #: the peer the line names (a network error's other end)
    count: int = 1  #: matches of the same entry on the same subject
    citation: Citation | None = None  #: the first line it was read at


@dataclass(frozen=True)
class ErrorFact:
    """One error line as a summary says it: its kind, who said it (a launcher's line names its worker in its
    message instead), what it says (whitespace folded), and where it was read."""

    kind: ErrorKind
    message: str
    citation: Citation | None = None
    rank: int | None = None
    pid: int | None = None
    host: str | None = None
    device: int | None = None
    launcher: bool = False  #: a launcher's line: its worker is named in the message
    exit_status: int | None = None  #: a launcher's exit line with a local rank: the worker's wait status
    local_rank: int | None = None
    raised: str | None = None  #: mp.spawn's word: the headline of the exception its process raised
    witness: str | None = None  #: what that exception's category means where the raiser waited on a peer


@dataclass(frozen=True)
class ErrorsFact:
    """Which error came first: by time where lines have one ('first-timed', or 'tied' when several ranks share
    the first time), else in file order ('first', or 'one' when it is the only one); 'ended': mp.spawn's word
    on why the job ended, where that is another error. A 'tied' one's `error` is torchelastic's Root Cause entry
    where it names one of the tied ranks: the order its agent observed, said as such."""

    role: str
    error: ErrorFact | None = None
    at: str | None = None  #: the first time, as the lines show it
    ranks: tuple[int, ...] = ()  #: the ranks with an error at that time ('tied')


@dataclass(frozen=True)
class TracebackFact:
    """The innermost torch.distributed frame a process's traceback reaches."""

    rank: int | None
    pid: int | None
    frame: str  #: the frame as the traceback prints it


@dataclass(frozen=True)
class RasFact:
    """What one NCCL RAS view says of one communicator, one kind (behind, ahead, missing, dead)."""

    comm: str
    kind: str
    comm_ranks: tuple[int, ...] = ()
    op: str | None = None
    count: int | None = None
    processes: tuple[str, ...] = ()  #: 'pid P on H', sorted


@dataclass(frozen=True)
class StackFact:
    """Processes whose stacks were pasted with no rank, and what their main threads show them doing."""

    pids: tuple[int, ...]
    doing: str  #: the stack class's words (parsers.stacks.classify)


@dataclass(frozen=True)
class DumpFact:
    """Stack dumps found in logs (faulthandler's, py-spy's) that show one thing, each cited where it was read."""

    tool: str  #: 'py-spy dump' | 'faulthandler dump'
    main: bool  #: the main thread's (else the thread a fatal signal hit)
    doing: str
    owners: tuple[tuple[str, Citation], ...] = ()  #: (whose: 'rank 3', 'pid 9, no rank printed'; where it was read)


@dataclass(frozen=True)
class CallSite:
    """Where a timed-out collective was called from: its innermost frame and the user's frame, if any."""

    function: str
    user: str | None  #: the innermost frame of the user's code ('train (train.py:88)')
    frames: int  #: how many frames the stack shows
    outermost: str
    ranks: tuple[int, ...]


@dataclass(frozen=True)
class TimeoutFact:
    """Ranks that timed out in one collective: global ranks, or ranks of the subgroup `comm` where the lines print
    no global rank."""

    ranks: tuple[int, ...]
    op: str | None
    seq: int | None
    comm: str | None = None  #: the subgroup whose ranks these are (no global rank printed); None: global ranks


@dataclass(frozen=True)
class SettingFact:
    """Every watchdog timeout that states its timeout states one too short for any healthy collective."""

    timeouts_ms: tuple[int, ...]  #: the distinct timeouts applied, sorted
    ranks: tuple[int, ...]  #: the ranks whose lines state them


@dataclass(frozen=True)
class DumpAskFact:
    """Ranks that dumped because another rank's watchdog asked every rank to."""

    origin: int  #: the rank whose collective timed out
    asked: tuple[int, ...]


@dataclass(frozen=True)
class TrailFact:
    """NCCL's 'file:line -> code' error returns, with no WARN line."""

    count: int
    first: str | None = None  #: the first such line, as NCCL printed it


@dataclass(frozen=True)
class CoverageFact:
    """Whose lines these files hold. `role`: 'unnamed' (processes of a job-sized NCCL communicator print no global
    rank: `ranks` are their communicator ranks), 'absent' (`absent` of `world` ranks print nothing, e.g. `first`),
    'reporting' (the lines are `ranks`' only, the job's size unstated), 'silent' (only the silent ranks below)."""

    role: str
    ranks: tuple[int, ...] = ()
    world: int | None = None
    absent: int = 0
    first: int | None = None
    silent: tuple[int, ...] = ()  #: ranks below `top`, the highest rank that times out, that print nothing
    top: int | None = None


@dataclass(frozen=True)
class CoverageNoteFact:
    """How much of the job the files cover: all ranks, all but a few, or maybe not every rank."""

    complete: bool
    absent: bool = False


@dataclass(frozen=True)
class NoErrorFact:
    """No line reports an error; `unread`: some lines were not understood (they may be the error)."""

    unread: bool = False


@dataclass(frozen=True)
class EvidenceGap:
    """A piece of evidence these files lack that decides what a live look decides (issue 39 item 7).

    `kind`: 'no-recorder-state' (a logs folder of an NCCL job with no recorder state file: who waits on whom
    inside NCCL, and since when, is unknown), 'fr-without-timing' (Flight Recorder dumps whose ops completed
    with no start time: 'scheduled' cannot be told from running on the GPU, so a rank whose op is queued
    behind a long kernel looks like its peers), 'no-stacks' (ranks whose output holds no faulthandler dump where
    others' do: what their threads did is unknown). `ranks`: the ranks it concerns, where known."""

    kind: str
    ranks: tuple[int, ...] = ()
    count: int = 0  #: files it concerns (dumps without timing)

    def to_dict(self) -> dict[str, Any]:
        return {"kind": self.kind, "ranks": list(self.ranks), "count": self.count}


@dataclass(frozen=True)
class UnreadFact:
    """Lines no reader understood: how many, and the first few ((line number, text), in file order)."""

    count: int
    first: tuple[tuple[int, str], ...] = ()


@dataclass(frozen=True)
class DisagreementFact:
    """Processes of a communicator known only by its pointer that logged different collectives at one opCount."""

    op_count: int
    processes: tuple[tuple[int | None, int | None, str], ...]  #: (pid, device, op), as listed


@dataclass(frozen=True)
class ClaimFact:
    """Rank `rank` is claimed by two or more processes (`claimants`: (host, pid) each, as the manifest lists
    them); `unclaimed`: ranks of the job that no process claims, which one of the claimants may be (a process
    whose environment was inherited, or set wrong). Said with both sources, judged for neither."""

    rank: int
    claimants: tuple[tuple[str, int], ...]
    unclaimed: tuple[int, ...] = ()


@dataclass(frozen=True)
class PeerFact:
    """Ranks whose lines name a peer by address (`what`: 'closed' or 'reset', a lost connection; 'size', NCCL's size
    mismatch with it), and whom the files pair the address with (parsers/judges/peer_address.py): `ranks` (one where
    mapped), `host`, `how` ('' where nothing maps it). The reporters only lost or met the peer: never the subject."""

    what: str
    reporters: tuple[int, ...]
    addr: str
    ranks: tuple[int, ...] = ()
    host: str | None = None
    how: str = ""
    sent: int | None = None  #: a size mismatch: the bytes the sending side sent
    posted: int | None = None  #: the bytes the receiving side posted
    side: str | None = None  #: the reporters' side of a size mismatch: 'receiver' | 'sender'
    citation: Citation | None = None  #: the first report's line
    paired: Citation | None = None  #: the line that pairs the address with the one rank named
    processes: tuple[tuple[str | None, int], ...] = ()  #: (host, pid) of reporters whose lines print no rank

    @property
    def mapped(self) -> int | None:
        """The one rank the address names, where the files leave one."""
        return self.ranks[0] if len(self.ranks) == 1 and self.how else None


@dataclass(frozen=True)
class CompletedPastFact:
    """In group `comm`, rank `rank` completed work up to `done` while rank `waiter` waits in work `seq`."""

    comm: str
    rank: int
    done: int
    waiter: int
    seq: int


@dataclass(frozen=True)
class FrReportFact:
    """One thing the Flight Recorder analyzer's report shows. `role`: 'not-joined' (`ranks` never recorded the
    collective; `minority`: whether they are few enough to be named), 'culprits' (`ranks` differ from the reference
    rank, in `kinds`), 'errors' (errors, no 'Culprit rank' line), 'undecided' (no dump from `ranks`[0]: `count`
    collectives not decided), 'gave-up' (it stopped checking `group`). `op`, `seq`, `group`: the collective."""

    role: str
    ranks: tuple[int, ...] = ()
    op: str | None = None
    seq: int | None = None
    group: str | None = None  #: the group's description, or its key without 'pg:'
    size: int | None = None
    minority: bool = True
    no_dump: tuple[int, ...] = ()
    kinds: tuple[str, ...] = ()
    complete: bool = True
    state: str | None = None
    count: int = 0


@dataclass(frozen=True)
class HorovodFact:
    """What Horovod's own lines show when they name no one rank. `role`: 'timeline' (its timeline file `path` could
    not be opened; `directory`: HOROVOD_TIMELINE names a directory), 'several' (`ranks` are missing from every
    stalled op), 'split' (different ranks, `ranks` in all, are missing from different ops), 'left-out' (`ranks` are
    left out of every ready list, the job's size unstated), 'varied' (ready lists leave out different ranks),
    'ready' (ready lists only). `ops`, `reports`: how many stalled ops, and how many entries named them."""

    role: str
    ranks: tuple[int, ...] = ()
    ops: int = 0
    reports: int = 0
    path: str | None = None
    directory: bool = False


#: a typed observation's facts (presentation words each kind: forensics/report/words/facts.py)
Facts = (HostFact | KnownFact | ErrorsFact | TracebackFact | RasFact | StackFact | DumpFact | tuple[CallSite, ...]
         | TimeoutFact | SettingFact | DumpAskFact | TrailFact | CoverageFact | CoverageNoteFact | NoErrorFact
         | UnreadFact | DisagreementFact | CompletedPastFact | FrReportFact | HorovodFact | ClaimFact | PeerFact)


class ObservationKind(str, Enum):
    """What an observation is about: the summary orders and words observations by kind."""

    SETTING = "setting"
    TIMEOUT = "timeout"
    DUMP_ASK = "dump-ask"
    DISAGREEMENT = "disagreement"
    CLAIM = "claim"
    PEER = "peer"
    COMPLETED_PAST = "completed-past"
    FR_REPORT = "fr-report"
    RAS = "ras"
    HOROVOD = "horovod"
    KNOWN = "known"
    COVERAGE = "coverage"
    FIRST_ERROR = "first-error"
    STACK = "stack"
    CALL_SITE = "call-site"
    DUMP = "dump"
    TRACEBACK = "traceback"
    HOST = "host"
    TRAIL = "trail"
    NO_ERROR = "no-error"
    UNREAD = "unread"
    COVERAGE_NOTE = "coverage-note"

    def __str__(self) -> str:
        return self.value


@dataclass(frozen=True)
class Observation:
    """One thing the files show, typed by kind, with the ranks it is about: the raw material of the
    summary and of 'what the evidence shows'. `facts` hold it typed (one of `Facts`, every kind), worded by
    presentation (forensics/report/words/facts.py); no judge writes an observation's words, and nothing reads them
    back."""

    kind: ObservationKind  #: always the enum (a plain name is refused)
    ranks: tuple[int, ...] = ()
    facts: Facts | None = None

    def __post_init__(self) -> None:
        if not isinstance(self.kind, ObservationKind):
            raise TypeError(f"an observation's kind must be an ObservationKind, not {self.kind!r}")


@dataclass
class Deadlock:
    """A cycle of the wait-for graph: every member waits on the next, each edge typed (its scope and op).
    `wheres` are the edges' scopes in words, empty here: presentation (forensics.report.words) writes them."""

    members: tuple[int, ...]
    edges: tuple["WaitEdge", ...]  #: waiter -> waited-on, global ranks, in cycle order
    wheres: tuple[str, ...] = ()

    @property
    def hops(self) -> list[tuple[int, int | None, str]]:
        """(waiter, waited-on, where in words) per edge, for renderers."""
        return [(e.waiter, e.peer, w) for e, w in zip(self.edges, self.wheres or ("",) * len(self.edges))]

    def to_dict(self) -> dict[str, Any]:
        return {"members": list(self.members),
                "edges": [{"waiter": e.waiter, "waits_on": e.peer, "where": w, **e.to_dict()}
                          for e, w in zip(self.edges, self.wheres or ("",) * len(self.edges))]}


@dataclass
class Verdict:
    """The answer: suspects (most likely first), a summary of at most two sentences, the lines under it
    (leads, stragglers, consequences, what the evidence shows), and what is missing.

    parsers/ fills the typed fields only; the words (summary, leads, stragglers, consequences, shows) stay
    empty until presentation writes them from the typed ones (forensics.report.words.worded)."""

    suspects: list[Suspect] = field(default_factory=list)
    summary: str = ""
    missing_evidence: list[str] = field(default_factory=list)
    sections: dict[str, Any] = field(default_factory=dict)  #: extra tables (stack tree, missing-line table...)
    graph: nx.DiGraph | None = None  #: global ranks (waiter -> waited on) from the log correlation, if any
    stack_tree: StackNode | None = None  #: the main-thread stacks' tree (sections["stack_tree"] is its JSON)
    hang: str = "not established"  #: 'hang' | 'progress' | 'not established' (decided from time, arbiter step 1)
    hang_basis: str = ""  #: what decided it (recorder ages, watchdog timeouts, ...), or why nothing could
    hung_ranks: list[int] = field(default_factory=list)  #: the hung scope where time shows it (stalled or timed out)
    leads: list[str] = field(default_factory=list)  #: suspects below the naming bar, one a line
    stragglers: list[str] = field(default_factory=list)  #: slow ranks, hosts or links of a running job
    consequences: list[str] = field(default_factory=list)  #: what the culprit explains (the others' waits...)
    shows: list[str] = field(default_factory=list)  #: what the evidence shows, one observation a line
    observations: list[Observation] = field(default_factory=list)
    deadlock: Deadlock | None = None
    #: further ranks of the head's own fault, named alike (each of a pair whose sends nobody answers: JOINT_CLAIMS)
    joint: list[Suspect] = field(default_factory=list)
    independent: list[Suspect] = field(default_factory=list)  #: further culprits: independent sinks of the graph
    progress: ProgressDecision | None = None  #: hang or progress, decided from time: for the words
    slow: Slowness | None = None  #: who is slow in a running job: for the words

    @property
    def culprits(self) -> list[Suspect]:
        """Every culprit: the leading one, the ranks of its own fault, then each independent sink (its own waiters,
        its own why)."""
        head = self.culprit
        return [head, *self.joint, *self.independent] if head is not None else []

    @property
    def culprit(self) -> Suspect | None:
        """The leading suspect, when its evidence is worth a name (CULPRIT_MIN_CONFIDENCE or more).

        Why a floor: 'rank 4 logged the first error' at 0.3 is a lead, not a culprit; an
        on-call engineer acting on it would drain the wrong machine. Leads stay in `suspects`.
        """
        head = self.suspects[0] if self.suspects else None
        return head if head is not None and head.confidence >= CULPRIT_MIN_CONFIDENCE else None

    @property
    def text(self) -> str:
        """The summary and every line under it, as one string (for a search by words)."""
        return "\n".join([self.summary, *self.leads, *self.stragglers, *self.consequences, *self.shows])

    def to_dict(self) -> dict[str, Any]:
        return {
            "summary": self.summary,
            "hang": self.hang,
            "hang_basis": self.hang_basis,
            "hung_ranks": list(self.hung_ranks),
            "culprit": self.culprit.to_dict() if self.culprit else None,
            "culprits": [c.to_dict() for c in self.culprits],
            "agreeing_sources": self.culprit.sources if self.culprit else [],
            "deadlock": self.deadlock.to_dict() if self.deadlock else None,
            "leads": list(self.leads),
            "stragglers": list(self.stragglers),
            "consequences": list(self.consequences),
            "shows": list(self.shows),
            "suspects": [s.to_dict() for s in self.suspects],
            "missing_evidence": list(self.missing_evidence),
            "sections": self.sections,
        }


@dataclass(frozen=True)
class WaitEdge:
    """'waiter waits on peer' in one scope (a communicator, or a process group where that is all we
    know), from any source (recorder, logs, RAS). A collective edge has `op` and `seq`; a point-to-point
    edge has `p2p_peer` and `p2p_seq` instead: p2p sequences are never compared with collective positions.

    Ranks here are communicator ranks; the correlation maps them to global ranks
    and hosts with the communicator's init lines or the bundle manifest.
    """

    comm_id: str  #: commId/hash as hex string, or a PG name when that is all we know
    waiter: int  #: the rank that waits (a communicator rank, or a global one where `global_ranks`)
    peer: int | None  #: the rank it waits on (None: a member no file names)
    source: str  #: 'recorder', 'nccl-log', 'ras', 'c10d', ...
    op: str | None = None  #: e.g. 'AllReduce seq 11'
    channel: int | None = None
    state: str | None = None  #: e.g. 'RecvWait', 'SendPeerWait'
    waiter_pid: int | None = None
    waiter_host: str | None = None
    detail: str = ""
    scope: str = "communicator"  #: 'communicator' or 'group'
    seq: int | None = None  #: the collective's position in its communicator
    p2p_peer: int | None = None  #: for send/recv: the peer of the point-to-point op
    p2p_seq: int | None = None  #: for send/recv: its sequence number between the two peers
    since_s: float | None = None  #: seconds the waiter has waited, where a time stamp says it
    global_ranks: bool = False  #: waiter and peer are global ranks (mapped, or a group whose ranks are global)
    #: point-to-point edges read from posted ops (judges/p2p_match.py): 'unmatched' where both histories show the
    #: peer never posted the op that pairs with this one; 'unknown' where no count can be trusted (a wait, never a
    #: cycle's edge); None where the edge is an observed wait (a proxy waiting for data) or not point-to-point
    p2p_match: str | None = None

    @property
    def point_to_point(self) -> bool:
        return self.p2p_peer is not None

    @property
    def can_close_a_cycle(self) -> bool:
        """Whether this edge may be part of a deadlock: a point-to-point edge only where both sides' posted ops
        show the wait (a send and a receive of one pair can be the same transfer whatever their p2p numbers)."""
        return not self.point_to_point or self.p2p_match != "unknown"

    def to_global(self, table: dict[int, int]) -> "WaitEdge | None":
        """This edge in global ranks through `table` (comm rank -> global rank), or None where one is unknown."""
        if self.global_ranks:
            return self
        waiter, peer = table.get(self.waiter), table.get(self.peer) if self.peer is not None else None
        return None if waiter is None or peer is None else replace(self, waiter=waiter, peer=peer, global_ranks=True)

    def to_dict(self) -> dict[str, Any]:
        return {"comm": self.comm_id, "scope": self.scope, "op": self.op, "seq": self.seq, "p2p_peer": self.p2p_peer,
                "p2p_seq": self.p2p_seq, "p2p_match": self.p2p_match, "source": self.source, "since_s": self.since_s}


@dataclass
class Findings:
    """What one judge returns: the one judge protocol (`Judge`). `source` is the kind of evidence it read
    (SOURCES); every suspect it returns carries it, so agreement between judges can be counted. `judge`
    names the judge. What only one judge decides has a typed field of its own (its graph, host reports,
    progress decision, slowness, stack tree, log correlation, point-to-point waits), None or empty from
    every other judge: a reader names the field and gets its type, never a slot to test for what it holds."""

    source: str
    suspects: list[Suspect] = field(default_factory=list)
    edges: list[WaitEdge] = field(default_factory=list)  #: its typed wait edges (comm ranks, mapped by comm_ranks)
    observations: list[Observation] = field(default_factory=list)
    sections: dict[str, Any] = field(default_factory=dict)  #: JSON tables for the verdict's sections
    judge: str = ""
    comm_ranks: dict[str, dict[int, int]] = field(default_factory=dict)  #: comm id -> {comm rank: global rank}
    graph: nx.DiGraph | None = None  #: the logs judge's wait-for graph of global ranks (each edge's `edge` a WaitEdge)
    missing: list[str] = field(default_factory=list)  #: what this judge could not see
    reports: list[HostReport] = field(default_factory=list)  #: the hosts judge's host reports
    progress: ProgressDecision | None = None  #: the progress judge's hang or progress, decided from time
    #: (whether any rank waited past a timeout: watchdog, gloo, NCCL, store, Horovod's stall check; the global
    #: ranks that did, where lines print them): time evidence of a hang and its scope, for the arbiter's step 1
    timeouts: tuple[bool, frozenset[int]] = (False, frozenset())
    slow: Slowness | None = None  #: the slowness judge's who is slow in a running job
    stack_tree: StackNode | None = None  #: the stacks judge's main-thread stack tree
    #: the logs judge's correlation (its last ops: the pictures of a logs-only post-mortem)
    log_analysis: LogAnalysis | None = None
    #: the p2p judge's ranks waiting in a point-to-point op (never 'stopped before' a collective)
    p2p_waits: P2PWaits | None = None
    #: the named judge's peers named by address (lost connections, size mismatches), mapped or not
    peers: tuple[PeerFact, ...] = ()

    def __post_init__(self) -> None:
        for s in self.suspects:
            if not s.source:
                s.source = self.source

    def global_edges(self) -> list[WaitEdge]:
        """Its wait edges in global ranks (edges whose ranks the judge could not map are left out)."""
        out = []
        for e in self.edges:
            mapped = e.to_global(self.comm_ranks.get(e.comm_id, {}))
            if mapped is not None:
                out.append(mapped)
        return out


@dataclass
class JudgeContext:
    """What a judge reads besides the evidence: the knowledge base, and the findings of the judges that ran
    before it (the logs judge maps the recorder's edges and skips ranks the p2p judge sees in a send/recv)."""

    kb: KnowledgeBase | None = None
    found: list[Findings] = field(default_factory=list)

    def of(self, judge: str) -> Findings:
        """The findings of `judge`, or empty ones where it has not run."""
        return next((f for f in self.found if f.judge == judge), Findings("", judge=judge))


class Judge(Protocol):
    """The one judge shape: a pure function of the evidence (parsers.gather.evidence.Evidence) and the context."""

    def __call__(self, ev: Evidence, ctx: JudgeContext) -> Findings: ...
