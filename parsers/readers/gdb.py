"""Reads the gdb collector's JSON (GDB/MI thread-info and stack-list-frames records)."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from parsers.input import bounded_json
from parsers.model import Frame, ThreadStack
from parsers.input.errors import FileFormatError
from parsers.input.ints import as_int

_LWP = re.compile(r"LWP (\d+)")


def read_gdb_json(path: Path, pid: int | None = None) -> list[ThreadStack]:
    """Threads with native frames; raises ValueError when the file is not the collector's JSON."""
    return parse_gdb_data(bounded_json.loads(Path(path).read_text(errors="replace")), pid)


def parse_gdb_data(data: Any, pid: int | None = None) -> list[ThreadStack]:
    """Threads from the gdb collector's decoded JSON."""
    if not isinstance(data, dict) or not isinstance(data.get("threads"), list):
        raise FileFormatError("not a gdb collector file")
    pid = pid if pid is not None else data.get("pid")
    pid = pid if isinstance(pid, int) and not isinstance(pid, bool) else None
    stacks = data.get("stacks", {})
    if not isinstance(stacks, dict):
        raise FileFormatError("gdb collector file: 'stacks' is not an object")
    threads = []
    for info in data["threads"][:MAX_THREADS]:
        if not isinstance(info, dict):
            raise FileFormatError("gdb collector file: a thread that is not an object")
        lwp = _LWP.search(str(info.get("target-id", ""))[:200])
        tid = int(lwp.group(1)) if lwp else as_int(info.get("id"), text=True)  # MI: a number, or its digits
        if tid is None:
            raise FileFormatError("gdb collector file: a thread with no id")
        raw_frames = stacks.get(str(info.get("id")), [])
        name = info.get("name")
        frames = [_frame(f) for f in (raw_frames if isinstance(raw_frames, list) else [])]
        threads.append(ThreadStack(thread_id=tid, name=name if isinstance(name, str) else None, frames=frames,
                                   is_main=pid is not None and tid == pid, source="gdb"))
    return threads


#: threads read from one gdb file (a process of more threads than this is not one we collected)
MAX_THREADS = 65536


def _frame(raw: Any) -> Frame:
    """One MI frame; a field of another type than gdb writes is taken as absent (the frame stays, as '??')."""
    frame = raw.get("frame", raw) if isinstance(raw, dict) else {}
    frame = frame if isinstance(frame, dict) else {}

    def text(key: str) -> str | None:
        value = frame.get(key)
        return value if isinstance(value, str) else None

    line = text("line")
    return Frame(
        function=text("func") or text("addr") or "??",
        file=text("file"),
        line=(int(line) if line and line.isdigit() and len(line) < 10
              else (frame["line"] if type(frame.get("line")) is int else None)),
        native=True,
        library=text("from"),
    )
