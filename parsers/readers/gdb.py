"""Reads the gdb collector's JSON (GDB/MI thread-info and stack-list-frames records)."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from parsers.model import Frame, ThreadStack
from parsers.errors import FileFormatError

_LWP = re.compile(r"LWP (\d+)")


def read_gdb_json(path: Path, pid: int | None = None) -> list[ThreadStack]:
    """Threads with native frames; raises ValueError when the file is not the collector's JSON."""
    return parse_gdb_data(json.loads(Path(path).read_text(errors="replace")), pid)


def parse_gdb_data(data: Any, pid: int | None = None) -> list[ThreadStack]:
    """Threads from the gdb collector's decoded JSON."""
    if not isinstance(data, dict) or not isinstance(data.get("threads"), list):
        raise FileFormatError("not a gdb collector file")
    pid = pid if pid is not None else data.get("pid")
    stacks = data.get("stacks", {})
    threads = []
    for info in data["threads"]:
        lwp = _LWP.search(str(info.get("target-id", "")))
        tid = int(lwp.group(1)) if lwp else int(info.get("id", 0))
        frames = [_frame(f) for f in stacks.get(str(info.get("id")), [])]
        threads.append(
            ThreadStack(thread_id=tid, name=info.get("name"), frames=frames, is_main=pid is not None and tid == int(pid), source="gdb")
        )
    return threads


def _frame(raw: Any) -> Frame:
    frame = raw.get("frame", raw) if isinstance(raw, dict) else {}
    line = frame.get("line")
    return Frame(
        function=frame.get("func") or frame.get("addr") or "??",
        file=frame.get("file"),
        line=int(line) if line and str(line).isdigit() else None,
        native=True,
        library=frame.get("from"),
    )
