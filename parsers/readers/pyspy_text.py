"""py-spy's text dump (`py-spy dump --pid P`, with or without --native/--locals).

Why text as well as JSON: it is what users paste into tickets and what older
collections hold. Format (py-spy 0.3/0.4, seen here): `Process <pid>: <cmdline>`,
`Python v3.x (...)`, then per thread `Thread <id> (<idle|active|active+gil|gil>):
"<name>"` and frames indented four spaces, innermost first: `func (file.py:line)`
for Python, `func (libfoo.so)` or `0x7f.. (libc.so.6)` for native frames; --locals
adds deeper-indented `Arguments:`/`Locals:` blocks, skipped here.
"""

from __future__ import annotations

import re
from typing import Iterable

from parsers.model.events import Origin, Parsed
from parsers.model import Frame, ThreadStack

_PROCESS = re.compile(r"^Process (?P<pid>\d{1,10}): ?(?P<cmd>.*)$")
_THREAD = re.compile(r"^Thread (?P<id>0x[0-9A-Fa-f]{1,16}|\d{1,10}) \((?P<state>[^)]{0,64})\)(?:: "
                     r"\"(?P<name>.{0,256})\")?\s*$")
_FRAME = re.compile(r"^    (?P<func>\S.*?) \((?P<where>[^()]*)\)\s*$")
_PY_WHERE = re.compile(r"^(?P<file>.+):(?P<line>\d{1,9})$")


#: C/C++/CUDA sources: py-spy --native names a native frame's source when the library has debug
#: info ('ncclAllReduce (collectives.cc:49)'), which is still a native frame
_NATIVE_SOURCES = (".c", ".cc", ".cpp", ".cxx", ".cu", ".cuh", ".h", ".hh", ".hpp")


def looks_like(text: str) -> bool:
    """A whole dump (`Process N:` first), or the part users paste: a `Thread` line, then a frame."""
    first, _, rest = text.partition("\n")
    if _PROCESS.search(first) is not None and "\nThread " in text:
        return True
    return _THREAD.match(first.rstrip()) is not None and _FRAME.match(rest.partition("\n")[0].rstrip()) is not None


def parse_lines(lines: Iterable[str]) -> Parsed:
    """ThreadStacks (in `stacks`) plus the pid/cmdline facts."""
    out = Parsed(kind="pyspy-text")
    current: ThreadStack | None = None
    for raw in lines:
        out.lines += 1
        line = raw.rstrip("\n")
        if not line.strip():
            continue
        m = _PROCESS.match(line)
        if m:
            out.facts["pid"] = int(m.group("pid"))
            out.facts["cmdline"] = m.group("cmd")
            continue
        if line.startswith("Python v"):
            out.facts["python"] = line.split()[1]
            continue
        m = _THREAD.match(line)
        if m:
            current = _thread(m, out.facts.get("pid"))
            if current.name == "MainThread" and "pid" not in out.facts and not m.group("id").startswith("0x"):
                out.facts["pid"] = current.thread_id  # no Process line pasted: a main thread's OS thread id is its pid
            out.stacks.append(current)
            continue
        m = _FRAME.match(line)
        if m and current is not None:
            current.frames.append(_frame(m.group("func"), m.group("where")))
            continue
        if line.startswith("        ") and current is not None:  # --locals detail
            continue
        out.unknown_lines += 1
    return out


def _thread(m: re.Match, pid: int | None) -> ThreadStack:
    """A ThreadStack from a `Thread` header match; the main thread is `MainThread`, or the one whose id is the pid."""
    state = m.group("state")
    tid = int(m.group("id"), 16) if m.group("id").startswith("0x") else int(m.group("id"))
    stack = ThreadStack(thread_id=tid, name=m.group("name"), active="active" in state,
                        owns_gil="gil" in state, source="py-spy")
    stack.is_main = stack.name == "MainThread" or tid == pid
    return stack


class PySpyBlock:
    """Line-fed reader of py-spy dumps pasted inside a log (SGLang's crash diagnostics print one per
    child: `Pyspy dump for PID 163685 (...)`, then the dump). A dump opens at `Process N:` or at a
    `Thread N (state): "name"` header, takes `Python v..`, blank lines and frames (the log reader has
    stripped their indent), and ends at any other line. `feed` returns whether the line was the dump's;
    threads with frames land in `stacks`, each with `origin`: its header's line and the Process line's pid."""

    MAX_THREADS = 4096
    MAX_FRAMES = 1024

    def __init__(self) -> None:
        self.pid: int | None = None
        self.open = False
        self.thread: ThreadStack | None = None
        self.stacks: list[ThreadStack] = []

    def feed(self, text: str, origin: Origin) -> bool:
        if not self.open and not text.startswith(("Process ", "Thread ")):
            return False  # the common case, a log line: no regex for it (this runs on every line of a log)
        line = text.rstrip()
        m = _PROCESS.match(line)
        if m:
            self._close()
            self.pid, self.open = int(m.group("pid")), True
            return True
        m = _THREAD.match(line)
        if m:
            self._file()
            if not self.open:
                self.pid, self.open = None, True
            self.thread = _thread(m, self.pid)
            self.thread.origin = Origin(host=origin.host, pid=self.pid, rank=origin.rank, file=origin.file,
                                        line=origin.line)
            return True
        if not self.open:
            return False
        if not line or (self.thread is None and line.startswith("Python v")):
            return True
        m = _FRAME.match("    " + line.lstrip())
        if m and self.thread is not None:
            if len(self.thread.frames) < self.MAX_FRAMES:
                self.thread.frames.append(_frame(m.group("func"), m.group("where")))
            return True
        self._close()
        return False

    def finish(self) -> None:
        self._close()

    def _file(self) -> None:
        """Keep the open thread if it has frames (a lone header is no stack)."""
        if self.thread is not None and self.thread.frames and len(self.stacks) < self.MAX_THREADS:
            self.stacks.append(self.thread)
        self.thread = None

    def _close(self) -> None:
        self._file()
        self.open, self.pid = False, None


def _frame(func: str, where: str) -> Frame:
    m = _PY_WHERE.match(where)
    if m and not where.endswith((".so", ".dll", ".dylib")):
        native = m.group("file").endswith(_NATIVE_SOURCES)
        return Frame(function=func, file=m.group("file"), line=int(m.group("line")), native=native)
    return Frame(function=func, native=True, library=where or None)
