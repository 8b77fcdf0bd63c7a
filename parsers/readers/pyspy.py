"""Reads `py-spy dump --json` output into ThreadStacks.

py-spy lists threads with `os_thread_id`; the main thread is the one whose id is the
process id. Native frames (with --native) carry the library in `module` and line 0.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from parsers.model import Frame, ThreadStack


class PySpyFormatError(ValueError):
    """The file is not py-spy JSON."""


def read_pyspy_json(path: Path, pid: int | None = None) -> list[ThreadStack]:
    """Threads from a py-spy JSON file; raises PySpyFormatError on anything else."""
    try:
        data = json.loads(Path(path).read_text(errors="replace"))
    except ValueError as err:
        raise PySpyFormatError(f"{path}: not JSON ({err})") from err
    return parse_pyspy_data(data, pid)


def parse_pyspy_data(data: Any, pid: int | None = None) -> list[ThreadStack]:
    if not isinstance(data, list):
        raise PySpyFormatError("py-spy JSON must be a list of threads")
    threads = []
    for item in data:
        if not isinstance(item, dict) or "frames" not in item:
            raise PySpyFormatError("py-spy thread entry without frames")
        os_tid = item.get("os_thread_id") or item.get("thread_id") or 0
        owner = pid if pid is not None else item.get("pid")
        threads.append(
            ThreadStack(
                thread_id=int(os_tid),
                name=item.get("thread_name"),
                frames=[_frame(f) for f in item.get("frames") or []],
                active=item.get("active"),
                owns_gil=item.get("owns_gil"),
                is_main=owner is not None and int(os_tid) == int(owner),
                source="py-spy",
            )
        )
    if threads and not any(t.is_main for t in threads):
        threads[0].is_main = threads[0].name in (None, "MainThread")
    return threads


def _frame(raw: dict[str, Any]) -> Frame:
    module = raw.get("module")
    native = bool(module) and not str(raw.get("filename", "")).endswith(".py")
    if native:
        return Frame(function=str(raw.get("name")), native=True, library=module)
    return Frame(
        function=str(raw.get("name")),
        file=raw.get("short_filename") or raw.get("filename"),
        line=raw.get("line") or None,
    )
