"""Reads `py-spy dump --json` output into ThreadStacks.

py-spy lists threads with `os_thread_id`; the main thread is the one whose id is the
process id. Native frames (with --native) carry the library in `module` and line 0.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from parsers.input import bounded_json
from parsers.model import Frame, ThreadStack
from parsers.input.errors import FileFormatError


class PySpyFormatError(FileFormatError):
    """The file is not py-spy JSON."""


#: a py-spy dump of the largest real process is some MiB (4,096 threads of 1,024 frames); more is not a dump
MAX_JSON_BYTES = 64 << 20


def read_pyspy_json(path: Path, pid: int | None = None) -> list[ThreadStack]:
    """Threads from a py-spy JSON file; raises PySpyFormatError on anything else (a file past MAX_JSON_BYTES
    too: decoding 255 MB of JSON took 5 s and most of a GiB, found by benchmarks/fuzz_structured.py)."""
    size = Path(path).stat().st_size
    if size > MAX_JSON_BYTES:
        raise PySpyFormatError(f"{path}: {size} bytes, more than a py-spy dump holds ({MAX_JSON_BYTES >> 20} MiB)")
    try:
        data = bounded_json.loads(Path(path).read_text(errors="replace"))
    except ValueError as err:
        raise PySpyFormatError(f"{path}: not JSON ({err})") from err
    return parse_pyspy_data(data, pid)


def parse_pyspy_data(data: Any, pid: int | None = None) -> list[ThreadStack]:
    """Threads of a decoded dump. Every field is checked for its type: a frame given as a list or a
    thread id of 5,000 digits is a PySpyFormatError (the file is recorded unreadable), never an
    AttributeError that would stop the analysis."""
    if not isinstance(data, list):
        raise PySpyFormatError("py-spy JSON must be a list of threads")
    threads = []
    for item in data:
        if not isinstance(item, dict) or "frames" not in item:
            raise PySpyFormatError("py-spy thread entry without frames")
        os_tid = _id(item.get("os_thread_id") or item.get("thread_id") or 0)
        owner = _id(pid if pid is not None else item.get("pid"))
        frames = item.get("frames") or []
        if not isinstance(frames, list):
            raise PySpyFormatError("py-spy frames must be a list")
        threads.append(
            ThreadStack(
                thread_id=os_tid,
                name=_text(item.get("thread_name")),
                frames=[_frame(f) for f in frames],
                active=item.get("active") if isinstance(item.get("active"), bool) else None,
                owns_gil=item.get("owns_gil") if isinstance(item.get("owns_gil"), bool) else None,
                is_main=owner is not None and os_tid == owner,
                source="py-spy",
            )
        )
    if threads and not any(t.is_main for t in threads):
        threads[0].is_main = threads[0].name in (None, "MainThread")
    return threads


def _id(value: Any) -> int:
    """A thread or process id: a non-negative 64-bit integer (or its digits)."""
    if isinstance(value, str) and value.isascii() and value.isdigit() and len(value) <= 20:
        value = int(value)
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value < (1 << 64):
        raise PySpyFormatError(f"py-spy thread or process id is no 64-bit number ({type(value).__name__})")
    return value


def _text(value: Any, limit: int = 4096) -> str | None:
    """A name from the dump, cut, with lone surrogates (a JSON '\\udcff') replaced: they cannot be printed."""
    if value is None:
        return None
    text = value if isinstance(value, str) else str(value) if isinstance(value, (int, float)) and abs(value) < 1e18 else "?"
    return text[:limit].encode("utf-8", "replace").decode("utf-8")


def _frame(raw: Any) -> Frame:
    if not isinstance(raw, dict):
        raise PySpyFormatError(f"py-spy frame must be an object, not {type(raw).__name__}")
    module = _text(raw.get("module"))
    filename = _text(raw.get("filename")) or ""
    native = bool(module) and not filename.endswith(".py")
    if native:
        return Frame(function=str(_text(raw.get("name"))), native=True, library=module)
    line = raw.get("line")
    return Frame(
        function=str(_text(raw.get("name"))),
        file=_text(raw.get("short_filename")) or filename or None,
        line=line if isinstance(line, int) and not isinstance(line, bool) and 0 < line < (1 << 31) else None,
    )
