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

from parsers.model.events import Parsed
from parsers.model import Frame, ThreadStack

_PROCESS = re.compile(r"^Process (?P<pid>\d{1,10}): ?(?P<cmd>.*)$")
_THREAD = re.compile(r"^Thread (?P<id>0x[0-9A-Fa-f]{1,16}|\d{1,10}) \((?P<state>[^)]{0,64})\)(?:: \"(?P<name>.{0,256})\")?\s*$")
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
            state = m.group("state")
            tid = int(m.group("id"), 16) if m.group("id").startswith("0x") else int(m.group("id"))
            current = ThreadStack(thread_id=tid, name=m.group("name"), active="active" in state,
                                  owns_gil="gil" in state, source="py-spy")
            current.is_main = current.name == "MainThread" or tid == out.facts.get("pid")
            if current.name == "MainThread" and "pid" not in out.facts and not m.group("id").startswith("0x"):
                out.facts["pid"] = tid  # no Process line pasted: a main thread's OS thread id is its process id
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


def _frame(func: str, where: str) -> Frame:
    m = _PY_WHERE.match(where)
    if m and not where.endswith((".so", ".dll", ".dylib")):
        native = m.group("file").endswith(_NATIVE_SOURCES)
        return Frame(function=func, file=m.group("file"), line=int(m.group("line")), native=native)
    return Frame(function=func, native=True, library=where or None)
