"""Reads the native-stack collector's JSON (libdw_stacks.py): every thread's native frames.

Format (written by forensics/collectors/libdw_stacks.py): `{"tool": "libdw", "pid": P,
"pause_ms": x, "error": str|null, "threads": [{"tid", "name", "frames": [{"function",
"library", "pc"}]}]}`, innermost frame first. Unknown function names stay '??' with the
library kept, as gdb's reader does, so the stack tree can still group them.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from parsers.input import bounded_json
from parsers.model import Frame, ThreadStack
from parsers.input.errors import FileFormatError
from parsers.input.ints import as_int

MAX_BYTES = 64 * 1024 * 1024


def read_native_json(path: Path, pid: int | None = None) -> list[ThreadStack]:
    """Threads with native frames; ValueError when the file is not the collector's JSON."""
    with open(path, "rb") as fh:
        raw = fh.read(MAX_BYTES + 1)
    if len(raw) > MAX_BYTES:
        raise FileFormatError(f"{path}: larger than {MAX_BYTES} bytes")
    return parse_native(bounded_json.loads(raw.decode("utf-8", errors="replace")), pid)


def parse_native(data: Any, pid: int | None = None) -> list[ThreadStack]:
    if not isinstance(data, dict) or not isinstance(data.get("threads"), list):
        raise FileFormatError("not a native-stack collector file")
    pid = pid if pid is not None else _int(data.get("pid"))
    out = []
    for th in data["threads"]:
        if not isinstance(th, dict):
            continue
        tid = _int(th.get("tid"))
        if tid is None:
            continue
        frames = [_frame(f) for f in th.get("frames") or [] if isinstance(f, dict)]
        name = th.get("name") if isinstance(th.get("name"), str) else None
        out.append(ThreadStack(thread_id=tid, name=name, frames=frames, is_main=pid is not None and tid == pid,
                               source="libdw"))
    return out


def _frame(raw: dict) -> Frame:
    fn = raw.get("function") if isinstance(raw.get("function"), str) else None
    lib = raw.get("library") if isinstance(raw.get("library"), str) else None
    return Frame(function=fn or (str(raw.get("pc")) if raw.get("pc") else "??"), native=True, library=lib)


def _int(value: Any) -> int | None:
    """A pid or thread id of the collector's file (a number, or its digits), else None."""
    return as_int(value, text=True)
