"""Python's faulthandler dump: every thread's Python stack, as the interpreter wrote it.

Why read it: it is the stack evidence a job leaves without any tool. A rank killed by
the watchdog's abort (SIGABRT) or a segfault prints it on stderr when faulthandler is
on (`PYTHONFAULTHANDLER=1`, or a framework that enables it, as SGLang and vLLM do), and
`forensics.arm()` writes one per stuck rank. Format (CPython 3.8-3.13 faulthandler.c):

    Fatal Python error: Aborted                      <- only for a fatal signal
    <blank>
    Thread 0x00007f6f89fff6c0 (most recent call first):
      File "/usr/lib/python3.12/threading.py", line 359 in wait
    <blank>
    Current thread 0x00007f8c94bcc300 (most recent call first):   <- the thread that faulted
      File "<string>", line 1 in <module>
    <blank>
    Extension modules: numpy.core._multiarray_umath, ... (total: 112)

`Stack (most recent call first):` heads a one-thread dump; `  <no Python frame>` and
`  ...` (over 100 frames) can stand for frames. CPython 3.14 adds the faulting thread's C
stack after the threads (`Current thread's C stack trace (most recent call first):`, then
`  Binary file "/usr/bin/python3", at _Py_DumpStack+0x42 [0x5b27f7d7147e]` lines, or
`  <cannot get C stack on this system>`; docs.python.org/3.14/library/faulthandler.html):
those lines are the dump's, read past (the crash site of one thread, no hang evidence). A frame says `line N in f`,
where a traceback says `line N, in f`; a launcher's prefix may have eaten its indent, and a paste
may have lost the newline between two frames (sglang #30453: `line 63 in finalize  File
"/usr/.../route.py", line 219 in finalize`), which is still two frames. Frames are innermost
first, as in py-spy. The dump names no thread, so the main thread is the one whose outermost frame
is a module's top level (`<module>`): threads started by `threading` begin in
`_bootstrap`. The dump names no pid or rank either; it has the rank its lines carry
(a launcher prefix), or the one `forensics.arm()` writes above it (TRIGGER_HEADER), and
no neighbouring line's: a dump on a stderr shared by several ranks is no rank's by
position. (Like every line without one, it takes its file's rank when the whole file
is one rank's: parsers.gather.evidence._apply_hints.)
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from parsers.model.events import ErrorEvent, ErrorKind, FatalError, Origin
from parsers.model.stacks import Frame, ThreadStack

_FATAL = re.compile(r"^(?:Fatal Python error|Windows fatal exception): (?P<what>\S.{0,300})$")
_THREAD = re.compile(r"^(?:Current thread|Thread) (?P<id>0x[0-9A-Fa-f]{1,16}) \(most recent call first\):$")
_ONE_THREAD = "Stack (most recent call first):"
_FRAME = re.compile(r'^\s*File "(?P<file>[^"]{0,1024})", line (?P<line>\d{1,9}|\?\?\?) in (?P<func>\S{1,256})$')
_GLUED = re.compile(r'(?<=\S)\s+(?=File ")')  #: where a lost newline joined the next frame on
MAX_GLUED = 16  #: frames one physical line may hold before it is no frame line at all
_PLACEHOLDERS = ("<no Python frame>", "...", "Garbage-collecting",
                 "<Cannot show all threads while the GIL is disabled>")
_C_TRACE = "Current thread's C stack trace (most recent call first):"
_C_LINE = re.compile(r'^\s*(?:Binary file "[^"]{0,1024}", at \S{1,512} \[0x[0-9a-fA-F]{1,16}\]|<[^<>]{1,80}>)$')
_EXTENSIONS = "Extension modules:"
_OPENERS = ("Fatal Python error: ", "Windows fatal exception: ", "Thread 0x", "Current thread 0x", _ONE_THREAD)
MAX_THREADS = 4096  #: faulthandler itself stops at 100 threads; a bigger "dump" is no dump
MAX_FRAMES = 1024  #: it stops at 100 frames a thread
MAX_KEPT_FRAMES = 100_000  #: frames kept from one file (ten full dumps): the rest are read past, and counted

#: what forensics.arm() writes above its dump, so the file says whose stacks these are
TRIGGER_HEADER = "# forensics.arm {kind} on rank {rank} (pid {pid}, host {host}): {message}"
_TRIGGER = re.compile(r"^# forensics\.arm (?P<kind>[\w-]{1,32}) on rank (?P<rank>\d{1,7}) "
                      r"\(pid (?P<pid>\d{1,10}), host (?P<host>[^\s()]{1,255})\): (?P<message>.{0,2000})$")

KIND = ErrorKind.PYTHON_FATAL  #: the ErrorEvent of a `Fatal Python error:` line


def trigger_identity(text: str) -> dict | None:
    """rank, pid and host from forensics.arm()'s header line, else None."""
    m = _TRIGGER.match(text.rstrip())
    if m is None:
        return None
    return {"rank": int(m.group("rank")), "pid": int(m.group("pid")), "host": m.group("host"), "alarm": m.group("kind")}


def looks_like(text: str, complete: bool) -> bool:
    """A file that is one dump: forensics.arm()'s (its header first), or a whole file (`complete`)
    of nothing but dump lines. A log that holds a dump among other lines stays a rank log, whose
    reader reads the dump where it stands."""
    lines = [ln.rstrip() for ln in text.splitlines() if ln.strip()]
    if lines and _TRIGGER.match(lines[0]):
        return len(lines) > 1 and _opens(lines[1])
    if not complete or not lines or not (_FATAL.match(lines[0]) or _opens(lines[0])):
        return False
    return all(_FATAL.match(ln) or _opens(ln) or frames_of(ln) or ln.strip() in _PLACEHOLDERS
               or ln.startswith(_EXTENSIONS) or ln == _C_TRACE or _C_LINE.match(ln) for ln in lines)


def frames_of(line: str) -> list[re.Match]:
    """The frame matches a line holds: one, or a few a paste glued together; [] for any other line."""
    m = _FRAME.match(line)
    if m:
        return [m]
    if line.count('File "', 0, 64 * 1024) < 2:
        return []
    parts = _GLUED.split(line, maxsplit=MAX_GLUED)
    if len(parts) > MAX_GLUED:
        return []
    matches = [_FRAME.match(part) for part in parts]
    return matches if all(matches) else []


def _opens(line: str) -> bool:
    """A thread's header."""
    return _THREAD.match(line) is not None or line == _ONE_THREAD


@dataclass
class Dump:
    """One process's dump: its threads, where it was read, the ranks its lines carried."""

    origin: Origin
    threads: list[ThreadStack] = field(default_factory=list)
    ranks: set = field(default_factory=set)  #: the ranks its lines carried (None for a line with none)

    @property
    def rank(self) -> int | None:
        """The rank every line of the dump carries, else None (never a guess from what surrounds it)."""
        return next(iter(self.ranks)) if len(self.ranks) == 1 and None not in self.ranks else None

    def settle(self) -> None:
        """Mark the main thread: the one thread whose outermost frame is a module's top level."""
        tops = [t for t in self.threads if t.frames and t.frames[-1].function == "<module>"]
        if len(tops) == 1:
            tops[0].is_main = True


class _Open:
    """The dump one process is writing: its threads so far, the thread frames go to."""

    def __init__(self, dump: Dump) -> None:
        self.dump = dump
        self.thread: ThreadStack | None = None
        self.in_c_trace = False  #: inside 3.14's C stack section


def stream(origin: Origin) -> tuple:
    """Which process's output a dump line is: its writer (Origin.writer) and the rank its own prefix names,
    since torchrun prefixes every line of a dump with `[rankN]:` and ranks that abort together interleave."""
    return (origin.rank, *origin.writer)


class FaulthandlerBlock:
    """Line-fed reader of dumps inside a log. `feed` returns (the line belonged to a dump, its
    events: the fatal error line's); `finish` closes the open ones. Each process's output (`stream`)
    has its own open dump, so interleaved dumps of labelled ranks stay apart. The threads land in
    `stacks`, each with `origin`: its header's line and the dump's rank."""

    MAX_OPEN = 4096  #: dumps open at once (one per labelled process); more closes them all

    def __init__(self) -> None:
        self.open: dict[tuple, _Open] = {}
        self.stacks: list[ThreadStack] = []
        self.kept = 0  #: frames kept so far (MAX_KEPT_FRAMES)
        self.dropped = 0  #: frames read past once the file's cap was reached

    def feed(self, text: str, origin: Origin) -> tuple[bool, list]:
        if not self.open and not text.startswith(_OPENERS):
            return False, []  # the common case, a log line: no regex for it (this runs on every line of a log)
        line = text.rstrip()
        key = stream(origin)
        m = _FATAL.match(line)
        if m:
            self._start(key, origin)
            return True, [ErrorEvent(kind=KIND, message=line[:500], origin=origin, source="faulthandler",
                                     data=FatalError(m.group("what")[:200]))]
        m = _THREAD.match(line)
        if m or line == _ONE_THREAD:  # (_opens, with the match kept for the thread id)
            cur = self.open.get(key)
            if cur is None or len(cur.dump.threads) >= MAX_THREADS:
                cur = self._start(key, origin)
            cur.thread = ThreadStack(thread_id=int(m.group("id"), 16) if m else 0, source="faulthandler", origin=origin,
                                     signalled=line.startswith("Current thread"))
            cur.in_c_trace = False
            cur.dump.threads.append(cur.thread)
            cur.dump.ranks.add(origin.rank)
            return True, []
        cur = self.open.get(key)
        if cur is None:
            return False, []
        if line == _C_TRACE:
            cur.thread, cur.in_c_trace = None, True
            return True, []
        if cur.in_c_trace and _C_LINE.match(line):
            return True, []
        if cur.thread is not None:
            found = frames_of(line)
            if found:
                self._frames(cur, found)
                cur.dump.ranks.add(origin.rank)
                return True, []
            if line.strip() in _PLACEHOLDERS:
                return True, []
        if not line:
            return True, []  # the blank lines between threads
        self._close(key)  # the dump of this process ends: at its extension list, or at any other line
        return line.startswith(_EXTENSIONS), []

    def finish(self) -> None:
        for key in list(self.open):
            self._close(key)

    def _start(self, key: tuple, origin: Origin) -> _Open:
        self._close(key)
        if len(self.open) >= self.MAX_OPEN:
            self.finish()
        cur = self.open[key] = _Open(Dump(origin=origin, ranks={origin.rank}))
        return cur

    def _frames(self, cur: _Open, found: list[re.Match]) -> None:
        for m in found:
            if len(cur.thread.frames) >= MAX_FRAMES or self.kept >= MAX_KEPT_FRAMES:
                self.dropped += 1
                continue
            self.kept += 1
            number = m.group("line")
            cur.thread.frames.append(Frame(function=m.group("func"), file=m.group("file"),
                                           line=int(number) if number.isdigit() else None))

    def _close(self, key: tuple) -> None:
        """File a dump's threads, each with the dump's rank (what all its lines carry)."""
        cur = self.open.pop(key, None)
        if cur is None:
            return
        cur.dump.settle()
        rank = cur.dump.rank
        for thread in cur.dump.threads:
            o = thread.origin or cur.dump.origin
            thread.origin = Origin(host=o.host, pid=o.pid, rank=rank, file=o.file, line=o.line, local_rank=o.local_rank)
            self.stacks.append(thread)
