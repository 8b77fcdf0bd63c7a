"""gdb's `thread apply all bt` as users paste it into issues: one process's threads, native frames.

Why: py-spy needs a Python process; gdb works on anything, so hang reports often carry a gdb
backtrace (NCCL #901, #899, Horovod #361). Format (gdb 8-14, seen in those threads):
`Thread 10 (Thread 0x7f535e7fb000 (LWP 500879)):` (newer gdb adds the thread's name in quotes),
then frames innermost first: `#0  0x00007f.. in func (args) at file.c:183`, `#4  func (args) at
proxy.cc:868` (no address when the frame is inlined), `#11 0x.. in ncclCommDestroy () from
/usr/lib/libnccl.so.2`, `#0  0x.. in ?? () from libcuda.so`. Thread 1 is the main thread; its
LWP is the process id. The `(gdb)` prompt and the user's own separator lines carry nothing.

One process per file: a second `Thread 1` (a second process pasted below the first) ends the read,
and a problem says so. Bounded: MAX_THREADS threads, MAX_FRAMES frames a thread.
"""

from __future__ import annotations

import re
from typing import Iterable

from parsers.model import Frame, ThreadStack
from parsers.model.events import Parsed

MAX_THREADS = 4096
MAX_FRAMES = 256
_THREAD = re.compile(r"^Thread (?P<n>\d{1,7}) \(Thread (?P<addr>0x[0-9a-fA-F]{1,16}) \(LWP (?P<lwp>\d{1,10})\)"
                     r"(?: \"(?P<name>[^\"]{0,256})\")?\)\s*:\s*$")
_FRAME = re.compile(r"^#(?P<i>\d{1,6})\s+(?:0x[0-9a-fA-F]{1,16} in )?(?P<rest>\S.*)$")
_AT = re.compile(r" at (?P<file>[^\s:]+):(?P<line>\d{1,9})\s*$")
_FROM = re.compile(r" from (?P<lib>\S+)\s*$")


def looks_like(text: str) -> bool:
    """A gdb `Thread N (Thread 0x.. (LWP n)):` line followed by a `#0` frame, near the top."""
    lines = [ln.strip() for ln in text.splitlines()[:60]]
    return any(_THREAD.match(a) and b.startswith("#0 ") for a, b in zip(lines, lines[1:]))


def parse_lines(lines: Iterable[str]) -> Parsed:
    """ThreadStacks (in `stacks`, native frames), the main thread's LWP as the pid."""
    out = Parsed(kind="gdb-text")
    current: ThreadStack | None = None
    for raw in lines:
        out.lines += 1
        line = raw.strip()
        if not line:
            continue
        m = _THREAD.match(line)
        if m:
            if m.group("n") == "1" and any(t.is_main for t in out.stacks):
                out.problems.append(f"gdb-text: a second process's threads start at line {out.lines}; only "
                                    f"the first is read")
                break
            if len(out.stacks) >= MAX_THREADS:
                out.problems.append(f"gdb-text: more than {MAX_THREADS} threads; the rest are not read")
                break
            current = ThreadStack(thread_id=int(m.group("lwp")), name=m.group("name"), is_main=m.group("n") == "1",
                                  source="gdb")
            if current.is_main:
                out.facts["pid"] = current.thread_id
            out.stacks.append(current)
            continue
        m = _FRAME.match(line)
        if m and current is not None:
            if len(current.frames) < MAX_FRAMES:
                current.frames.append(_frame(m.group("rest")))
            continue
        if line.startswith("(gdb)") or set(line) <= set("=-*# ") or line.lower().startswith(("rank", "===")):
            continue
        out.unknown_lines += 1
    return out


def _frame(rest: str) -> Frame:
    """`func (args) at file:line` or `func (args) from lib` or `?? ()`: the function is what comes before
    its argument list (gdb prints one after every name)."""
    at, frm = _AT.search(rest), _FROM.search(rest)
    func = rest.split(" (", 1)[0].strip() or "??"
    if at:
        return Frame(function=func, file=at.group("file"), line=int(at.group("line")), native=True)
    return Frame(function=func, native=True, library=frm.group("lib") if frm else None)
