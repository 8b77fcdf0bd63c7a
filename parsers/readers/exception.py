"""The last Python exception of each rank, from its output text or its torchelastic error file.

Why: a rank that died of `torch.OutOfMemoryError`, a `DistStoreError` at the rendezvous
or an NCCL error says so itself, in its own output; a verdict that can quote the type,
message and innermost frame tells the user why, not only who. Forms met (real runs, see
tests/fixtures/gloo14/): tracebacks with or without PyTorch's `[rankN]:` line prefix (and
torchrun --tee's `[defaultN]:`), chained exceptions ("The above exception was the direct
cause ..." / "During handling of the above exception ..."), torchelastic's ChildFailedError
report with its "Root Cause (first observed failure)" block, and the TORCHELASTIC_ERROR_FILE
JSON that `@record` writes. Everything is bounded (lines, frames, message length) and no
input makes these functions raise.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any, Iterable

from parsers.input import bounded_json
from parsers.readers.prefix import TORCHRUN_LABEL, strip_prefix
from parsers.readers.last_error import own_reason
from parsers.readers.launcher import SPAWN_RAISED

MAX_LINES = 200_000  #: lines read from one output
MAX_FRAMES = 64  #: frames kept per traceback (the innermost ones)
MAX_MESSAGE = 2000  #: characters kept of a message
MAX_MESSAGE_LINES = 12  #: continuation lines of a multi-line message
MAX_EXCEPTIONS = 256  #: exceptions kept per output (the last ones)

_TRACEBACK = "Traceback (most recent call last):"
_CHAIN = {
    "The above exception was the direct cause of the following exception:": "cause",
    "During handling of the above exception, another exception occurred:": "context",
}
_FRAME = re.compile(r'^\s*File "(?P<file>[^"]{1,4096})", line (?P<line>\d{1,9})(?:, in (?P<func>.{1,512}))?$')
_EXC = re.compile(r"^(?P<type>(?:[A-Za-z_]\w*\.){0,12}[A-Za-z_]\w*)(?::(?: (?P<msg>.*))?)?$")
_KNOWN_BARE = re.compile(
    r"^(?:torch\.(?:distributed\.)?)?(?:OutOfMemoryError|DistStoreError|DistBackendError|DistNetworkError|"
    r"DistError|NCCLError|ChildFailedError)\b|^(?:[\w.]+\.)?(?:RuntimeError|TimeoutError|ValueError)\b"
)
_LOG_RECORD = re.compile(r"^\[?[EWIF]\d{4} \d\d:\d\d:\d\d|^\[[EWIF]\d{4}|^\[?\d{4}-\d\d-\d\d[ "
                         r"T]\d\d:|^\S+:\d+:\d+ \[\d+\] NCCL ")
_OOM = re.compile(r"out of memory\.? Tried to allocate (?P<size>[\d.]+ ?[KMGTP]?i?B)", re.I)
_BARRIER = re.compile(r"\bRanks? (?P<ranks>\d{1,7}(?:, \d{1,7}){0,4095}) failed to pass monitoredBarrier")
_JOINED = re.compile(r"Timed out after (?P<secs>\d+) seconds waiting for clients\. "
                     r"(?P<got>\d+)/(?P<want>\d+) clients joined")
_ROOT_FIELD = re.compile(r"^\s{0,6}(?P<key>time|host|rank|exitcode|error_file|traceback)\s*:\s?(?P<value>.*)$")


@dataclass(frozen=True)
class TracebackFrame:
    """One frame of a traceback: where the code was."""

    file: str
    line: int
    function: str | None

    def __str__(self) -> str:
        return f"{self.function or '?'} ({self.file}:{self.line})"


@dataclass
class PyException:
    """One Python exception as printed: type, message, innermost frame, where it was read.

    `rank` is the global rank the line prefix (`[rankN]:`) or the report names; `local_rank`
    the one torchrun's `[defaultN]:` prefix names. `source`/`line` point at the exception
    line in the text it was read from. `chain` holds the earlier exceptions of the same
    chain ("cause" or "context"), oldest first. `category` is a coarse class for the
    judges: oom, store-timeout, nccl, gloo, timeout, child-failed, runtime, other.
    """

    type: str
    message: str
    frame: TracebackFrame | None = None
    frames: list[TracebackFrame] = field(default_factory=list)
    rank: int | None = None
    local_rank: int | None = None
    source: str | None = None
    line: int | None = None
    form: str = "traceback"  #: traceback, bare (no traceback), error-file, root-cause
    chain: list["PyException"] = field(default_factory=list)
    chain_kind: str | None = None  #: how this one follows the previous of its chain: cause, context
    category: str = "other"
    details: dict[str, Any] = field(default_factory=dict)

    @property
    def short_type(self) -> str:
        """`OutOfMemoryError` of `torch.OutOfMemoryError`."""
        return self.type.rsplit(".", 1)[-1]

    def headline(self) -> str:
        """`torch.OutOfMemoryError: CUDA out of memory. ... at load (train.py:44)` (message cut to 200); an NCCL
        error with a 'Last error:' line says that line first: `DistBackendError: Duplicate GPU detected : ...;
        NCCL error in: ..., invalid usage ...`."""
        msg = self.message if len(self.message) <= 200 else self.message[:197] + "..."
        cause = self.details.get("last_error")
        # NCCL's own reason heads what c10d made of it ('invalid usage'): the cause, then its consequence
        if own_reason(cause):
            first = self.message.split("\n", 1)[0]
            msg = f"{cause}; {first if len(first) <= 160 else first[:157] + '...'}"
        where = f" at {self.frame}" if self.frame else ""
        return f"{self.type}: {msg}{where}" if msg else f"{self.type}{where}"

    def to_dict(self) -> dict[str, Any]:
        return {
            "type": self.type, "message": self.message, "frame": _frame_dict(self.frame),
            "frames": [_frame_dict(f) for f in self.frames], "rank": self.rank, "local_rank": self.local_rank,
            "source": self.source, "line": self.line, "form": self.form, "category": self.category,
            "chain": [c.to_dict() for c in self.chain], "chain_kind": self.chain_kind, "details": dict(self.details),
        }


@dataclass
class ChildFailure:
    """One entry of torchelastic's ChildFailedError report (the "Failures:" and "Root Cause" lists).

    `root_cause` marks the "first observed failure", which is the first process to exit,
    often a victim rather than the culprit (field notes): a fact to weigh, not a verdict.
    """

    rank: int | None
    local_rank: int | None
    host: str | None
    exitcode: int | None
    pid: int | None
    signal: str | None
    error_file: str | None
    time: str | None
    root_cause: bool
    exception: PyException | None
    traceback_note: str | None  #: "Signal 15 (SIGTERM) received by PID ..." or the "To enable traceback" hint
    source: str | None = None
    line: int | None = None

    def to_dict(self) -> dict[str, Any]:
        data = {k: getattr(self, k) for k in ("rank", "local_rank", "host", "exitcode", "pid", "signal", "error_file",
                                             "time", "root_cause", "traceback_note", "source", "line")}
        data["exception"] = self.exception.to_dict() if self.exception else None
        return data


@dataclass
class OutputErrors:
    """Everything of this kind one output holds, in the order printed."""

    exceptions: list[PyException] = field(default_factory=list)
    failures: list[ChildFailure] = field(default_factory=list)
    lines: int = 0
    truncated: bool = False  #: more lines than MAX_LINES: the rest was not read

    def last(self, rank: int | None = None) -> PyException | None:
        """The last exception printed (by `rank`, when given; unprefixed ones count for any rank)."""
        for exc in reversed(self.exceptions):
            if rank is None or exc.rank in (rank, None):
                return exc
        return None

    def last_per_rank(self) -> dict[int | None, PyException]:
        """The last exception of each rank the prefixes name (None: lines with no rank prefix)."""
        out: dict[int | None, PyException] = {}
        for exc in self.exceptions:
            out[exc.rank] = exc
        return out

    @property
    def root_cause(self) -> ChildFailure | None:
        return next((f for f in reversed(self.failures) if f.root_cause), None)


def _frame_dict(frame: TracebackFrame | None) -> dict[str, Any] | None:
    return {"file": frame.file, "line": frame.line, "function": frame.function} if frame else None


def categorize(type_name: str, message: str) -> str:
    """Coarse class of an exception, from facts of its wording (field notes, real runs)."""
    short = type_name.rsplit(".", 1)[-1]
    low = message.lower()
    if short == "OutOfMemoryError" or "out of memory" in low:
        return "oom"
    if short == "DistStoreError" or "clients joined" in low or ("store" in low and "timed out" in low):
        return "store-timeout"
    if short == "ChildFailedError":
        return "child-failed"
    if "failed to pass monitoredbarrier" in low:  # the ranks it names did not arrive; the raiser waited for them
        return "barrier-absent"
    if "successfully reached monitoredbarrier" in low:  # arrived, then lost its wait for the reporter's answer
        return "barrier-wait"
    if "detected mismatch between collectives" in low:  # ProcessGroupWrapper's check: raised where it is seen
        return "mismatch"
    if "nccl" in low or short in ("NCCLError", "DistBackendError") and "nccl" in low:
        return "nccl"
    if "gloo" in low or "connection closed by peer" in low or "connection reset by peer" in low:
        return "gloo"
    if "timeout" in low or "timed out" in low or short == "TimeoutError":
        return "timeout"
    if short in ("RuntimeError", "DistBackendError", "DistNetworkError", "DistError"):
        return "runtime"
    return "other"


def _details(exc: PyException) -> None:
    m = _OOM.search(exc.message)
    if m:
        exc.details["tried_to_allocate"] = m.group("size")
    at = exc.message.find(_LAST_ERROR)
    if at >= 0:  # NCCL's own reason, the cause under the exception's 'invalid usage' or 'internal error'
        detail = exc.message[at + len(_LAST_ERROR):].strip().split("\n", 1)[0].strip()
        if detail:
            exc.details["last_error"] = detail[:500]
    m = _BARRIER.search(exc.message)
    if m:
        exc.details["absent_ranks"] = [int(r) for r in m.group("ranks").split(", ")]
    m = _JOINED.search(exc.message)
    if m:
        exc.details.update(store_timeout_s=int(m.group("secs")), clients_joined=int(m.group("got")),
                           clients_expected=int(m.group("want")))


def _is_exception_line(text: str) -> re.Match | None:
    """`pkg.Type: message` or `Type` at column 0, with a type name that looks like one."""
    if not text or text[0].isspace() or len(text) > 100_000:
        return None
    m = _EXC.match(text)
    if not m:
        return None
    last = m.group("type").rsplit(".", 1)[-1]
    if not last[:1].isupper():
        return None
    if m.group("msg") is None and ":" not in text and not re.search(r"(Error|Exception|Exit|Interrupt|Warning)$", last):
        return None
    return m


class _Stream:
    """Parse state of one line stream (one rank prefix, or unprefixed lines)."""

    def __init__(self) -> None:
        self.frames: list[TracebackFrame] = []
        self.in_tb = False
        self.current: PyException | None = None  #: the exception whose message may still continue
        self.msg_lines = 0
        self.last: PyException | None = None  #: the last exception of this stream, a chain may continue it
        self.pending_chain: str | None = None
        self.spawn_index: int | None = None  #: mp.spawn named the worker whose traceback comes next


def read_output(lines: Iterable[str], source: str | None = None) -> OutputErrors:
    """Every exception and ChildFailedError entry in an output, in order. Never raises on bad input."""
    out = OutputErrors()
    streams: dict[tuple[int | None, int | None], _Stream] = {}
    root_block: list[tuple[int, str]] | None = None
    try:
        for lineno, raw in enumerate(lines, 1):
            if lineno > MAX_LINES:
                out.truncated = True
                break
            out.lines = lineno
            if not isinstance(raw, str):
                raw = raw.decode("utf-8", "replace") if isinstance(raw, (bytes, bytearray)) else str(raw)
            text, rank, local = _unwrap(raw)
            if root_block is not None:
                if text.startswith("=" * 20) and len(root_block) > 3:
                    out.failures.extend(_failures(root_block, source))
                    root_block = None
                    continue
                if len(root_block) < 5000:
                    root_block.append((lineno, raw.rstrip("\r\n")))
                continue
            st = streams.setdefault((rank, local), _Stream())
            _feed(out, st, text, rank, local, source, lineno)
            last = out.exceptions[-1] if out.exceptions else None
            if last is not None and last.short_type == "ChildFailedError" and last.line == lineno:
                root_block = []
        if root_block:
            out.failures.extend(_failures(root_block, source))
    except Exception:  # noqa: BLE001 - a reader of hostile text must not take the analysis down
        out.truncated = True
    if len(out.exceptions) > MAX_EXCEPTIONS:
        out.exceptions = out.exceptions[-MAX_EXCEPTIONS:]
    return out


def _unwrap(raw: str) -> tuple[str, int | None, int | None]:
    """Payload of a line with its rank prefix removed, keeping indentation (frames need it)."""
    line = raw.rstrip("\r\n")
    local = None
    m = TORCHRUN_LABEL.match(line)
    if m and m.group("role") != "rank":
        local = int(m.group("local"))
        line = line[m.end():]
    _, pre = strip_prefix(line)
    rank = pre.rank
    # strip only the wrappers, not the indentation that tells frames from exception lines
    if line.startswith("[rank") and "]:" in line[:16]:
        line = line[line.index("]:") + 2:]
        if line.startswith(" ") and not line.startswith("  "):
            line = line[1:]  # PyTorch writes "[rank3]: " before every line
    return line, rank, local


def _feed(out: OutputErrors, st: _Stream, text: str, rank: int | None, local: int | None, source: str | None,
          lineno: int) -> None:
    stripped = text.strip()
    if stripped == _TRACEBACK:
        _close_message(st)
        st.in_tb, st.frames = True, []
        return
    if stripped in _CHAIN:
        _close_message(st)
        st.pending_chain = _CHAIN[stripped]
        return
    m = SPAWN_RAISED.match(stripped) if not st.in_tb else None
    if m:  # '-- Process 1 terminated with the following error:': the next traceback is worker 1's
        st.spawn_index = int(m.group("idx"))
        return
    if st.in_tb:
        m = _FRAME.match(text)
        if m:
            if len(st.frames) >= MAX_FRAMES:
                st.frames.pop(0)
            st.frames.append(TracebackFrame(m.group("file"), int(m.group("line")), m.group("func")))
            return
        exc = _is_exception_line(text)
        if exc:
            _start(out, st, exc, rank, local, source, lineno, "traceback", list(st.frames))
            st.in_tb = False
        elif stripped.startswith("Traceback") or (stripped and not text[:1].isspace() and len(st.frames) == 0):
            st.in_tb = False  # not a traceback after all
        return  # code lines, ^^^ markers, '...' elisions
    if st.current is not None:
        if _interleaved(st.current, text, stripped):
            return  # another process's traceback line between this message's lines: skipped, the message goes on
        if not stripped or _LOG_RECORD.match(stripped) or st.msg_lines >= MAX_MESSAGE_LINES:
            _close_message(st)
        elif stripped.startswith(("Exception raised from", "frame #")):
            st.current.details["cpp_trace"] = True
            _close_message(st)
            return
        else:
            cur = st.current
            if len(cur.message) < MAX_MESSAGE:
                cur.message = (cur.message + "\n" + stripped)[:MAX_MESSAGE]
            st.msg_lines += 1
            if _LAST_ERROR in cur.message and not cur.message.endswith(_LAST_ERROR):
                _close_message(st)  # NCCL's last error is one line: the message ends with it
            return
    exc = _is_exception_line(text) if _KNOWN_BARE.match(stripped) and not text[:1].isspace() else None
    if exc:
        _start(out, st, exc, rank, local, source, lineno, "bare", [])


#: the heading c10d prints above NCCL's own last error (ncclGetLastError), under 'NCCL error in: ...' and its code
_LAST_ERROR = "Last error:"
#: a line of only a traceback's position markers ('^^^^', '~~~^^^', Python 3.11+)
_MARKER = re.compile(r"^[\^~]+$")


def _interleaved(exc: PyException, text: str, stripped: str) -> bool:
    """A line that cannot belong to an NCCL error's message: a traceback frame, its indented code line or a
    `^` marker line. Why: ranks of one node write to one terminal, so another rank's traceback (or this
    one's, printed by a launcher in another order) falls between 'NCCL error in: ...' and the 'Last error:'
    lines that say why (Megatron-LM#661); c10d writes those lines at column 0, so an indented line is no part
    of them. Other messages keep every line, as before."""
    if not stripped or not (exc.message.startswith("NCCL error") or "NCCL version" in exc.message[:400]):
        return False
    return bool(_FRAME.match(text) or _MARKER.match(stripped) or text[:1].isspace())


def _start(out: OutputErrors, st: _Stream, m: re.Match, rank: int | None, local: int | None, source: str | None,
           lineno: int, form: str, frames: list[TracebackFrame]) -> None:
    message = (m.group("msg") or "").strip()[:MAX_MESSAGE]
    exc = PyException(type=m.group("type"), message=message, frame=frames[-1] if frames else None, frames=frames,
                      rank=rank, local_rank=local, source=source, line=lineno, form=form)
    prev = st.last
    if st.pending_chain and prev is not None:
        # "The above exception was the direct cause ...": the earlier one becomes part of this one's chain
        exc.chain_kind = st.pending_chain
        exc.chain = (prev.chain + [_unchained(prev)])[-8:]
        if out.exceptions and out.exceptions[-1] is prev:
            out.exceptions.pop()
    st.pending_chain = None
    if st.spawn_index is not None and form == "traceback":
        exc.local_rank = exc.local_rank if exc.local_rank is not None else st.spawn_index
        exc.details["launcher"] = "mp.spawn"
        st.spawn_index = None
    st.current, st.msg_lines, st.last = exc, 0, exc
    out.exceptions.append(exc)


def _unchained(exc: PyException) -> PyException:
    """A chain link without its own chain (the chain lives once, on the last link)."""
    _settle(exc)
    copy = PyException(**{**exc.__dict__, "chain": []})
    return copy


def _settle(exc: PyException) -> None:
    exc.category = categorize(exc.type, exc.message)
    _details(exc)


def _close_message(st: _Stream) -> None:
    if st.current is not None:
        _settle(st.current)
    st.current = None


def _finish(out: OutputErrors) -> None:
    for exc in out.exceptions:
        _settle(exc)


def read_lines(lines: Iterable[str], source: str | None = None) -> OutputErrors:
    """read_output, with categories filled in for exceptions whose message ran to the end."""
    out = read_output(lines, source)
    _finish(out)
    return out


def last_exception(lines: Iterable[str], source: str | None = None, rank: int | None = None) -> PyException | None:
    """The last exception in an output (of `rank` when given)."""
    return read_lines(lines, source).last(rank)


def _failures(block: list[tuple[int, str]], source: str | None) -> list[ChildFailure]:
    """Entries of a ChildFailedError report: `[i]:` then `key : value` lines, traceback indented."""
    found: list[ChildFailure] = []
    root = False
    entry: dict[str, Any] | None = None
    tb: list[str] = []

    def close() -> None:
        if entry is not None:
            found.append(_failure(entry, tb, root, source))

    for lineno, raw in block:
        text, _, _ = _unwrap(raw)
        stripped = text.strip()
        if stripped.startswith("Root Cause"):
            close()
            entry, tb, root = None, [], True
            continue
        if re.fullmatch(r"\[\d{1,6}\]:", stripped):
            close()
            entry, tb = {"line": lineno}, []
            continue
        if entry is None or stripped.startswith("-" * 20):
            continue
        m = _ROOT_FIELD.match(text)
        if m and "traceback" not in entry:
            entry[m.group("key")] = m.group("value").strip()
            if m.group("key") == "traceback":
                tb = [m.group("value").strip()]
            continue
        if "traceback" in entry:
            tb.append(text[2:] if text.startswith("  ") else text)
    close()
    return found[:256]


def _failure(entry: dict[str, Any], tb: list[str], root: bool, source: str | None) -> ChildFailure:
    rank = local = pid = code = None
    m = re.match(r"(-?\d+)(?: \(local_rank: (\d+)\))?", entry.get("rank", ""))
    if m:
        rank, local = int(m.group(1)), int(m.group(2)) if m.group(2) else None
    m = re.match(r"(-?\d+)(?: \(pid: (\d+)\))?\s*(?:\((\w+)\))?", entry.get("exitcode", ""))
    sig = None
    if m:
        code, pid, sig = int(m.group(1)), int(m.group(2)) if m.group(2) else None, m.group(3)
    exc, note = None, None
    if tb and tb[0].startswith(_TRACEBACK):
        inner = read_lines(tb, source)
        exc = inner.last()
        if exc is not None:
            exc.rank, exc.local_rank, exc.form = rank, local, "root-cause" if root else "failure"
            exc.line = entry.get("line")
    elif tb:
        note = tb[0][:500]
    err_file = entry.get("error_file")
    return ChildFailure(rank=rank, local_rank=local, host=entry.get("host") or None, exitcode=code, pid=pid,
                        signal=sig, error_file=None if err_file in (None, "<N/A>") else err_file,
                        time=entry.get("time"), root_cause=root, exception=exc, traceback_note=note,
                        source=source, line=entry.get("line"))


def read_error_file(text: str | bytes, source: str | None = None) -> PyException | None:
    """The exception in a TORCHELASTIC_ERROR_FILE (what `@record` writes), or None.

    Shape (torch 2.13, real): {"message": {"message": "RuntimeError: ...", "extraInfo":
    {"py_callstack": "Traceback ...", "timestamp": "..."}}}. Older and C++-side writers put
    a plain string in "message"; both are accepted.
    """
    try:
        if isinstance(text, bytes):
            text = text.decode("utf-8", "replace")
        if len(text) > 16 * 1024 * 1024:
            return None
        data = bounded_json.loads(text)
    except (ValueError, TypeError, RecursionError):
        return None
    if not isinstance(data, dict):
        return None
    msg = data.get("message")
    callstack, stamp = None, None
    if isinstance(msg, dict):
        extra = msg.get("extraInfo") if isinstance(msg.get("extraInfo"), dict) else {}
        callstack = extra.get("py_callstack") if isinstance(extra.get("py_callstack"), str) else None
        stamp = extra.get("timestamp")
        msg = msg.get("message")
    if not isinstance(msg, str) and callstack is None:
        return None
    exc = None
    if callstack:
        exc = read_lines(callstack.splitlines()[:MAX_LINES], source).last()
    if exc is None and isinstance(msg, str):
        m = _is_exception_line(msg.splitlines()[0] if msg else "")
        if m:
            exc = PyException(type=m.group("type"), message=(m.group("msg") or "")[:MAX_MESSAGE], source=source)
        else:
            exc = PyException(type="unknown", message=msg[:MAX_MESSAGE], source=source)
    if exc is None:
        return None
    exc.form, exc.line = "error-file", None
    exc.category = categorize(exc.type, exc.message)
    _details(exc)
    if stamp is not None:
        exc.details["timestamp"] = str(stamp)[:40]
    return exc
