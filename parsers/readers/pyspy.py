"""Reads `py-spy dump --json` output into ThreadStacks.

py-spy lists threads with `os_thread_id`; the main thread is the one whose id is the
process id. Native frames (with --native) carry the library in `module` and line 0.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from parsers.input import bounded_json
from parsers.model import Frame, ThreadStack
from parsers.model.stacks import P2P_ALL_FRAMES, P2P_CALLS, P2P_PY_FRAMES
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
    number = isinstance(value, (int, float)) and abs(value) < 1e18
    text = value if isinstance(value, str) else str(value) if number else "?"
    return text[:limit].encode("utf-8", "replace").decode("utf-8")


def is_native_frame(raw: dict) -> bool:
    """A native frame of py-spy's JSON (--native): its `module` names a library and its file is no .py."""
    return bool(_text(raw.get("module"))) and not (_text(raw.get("filename")) or "").endswith(".py")


def p2p_call_frames(frames: list) -> list[dict]:
    """torch.distributed's point-to-point frames among the innermost P2P_PY_FRAMES Python frames of a thread's
    py-spy frames. Native frames are not counted: a send still connecting to its peer sits under 25 of NCCL's and
    torch's (ncclTransportP2pSetup, bootstrapRecv, accept), which would push the Python call out of any window."""
    python = [f for f in frames[:P2P_ALL_FRAMES] if isinstance(f, dict) and not is_native_frame(f)]
    return [f for f in python[:P2P_PY_FRAMES] if is_p2p_frame(f)]


def _frame(raw: Any) -> Frame:
    if not isinstance(raw, dict):
        raise PySpyFormatError(f"py-spy frame must be an object, not {type(raw).__name__}")
    if is_native_frame(raw):
        return Frame(function=str(_text(raw.get("name"))), native=True, library=_text(raw.get("module")))
    filename = _text(raw.get("filename")) or ""
    line = raw.get("line")
    return Frame(
        function=str(_text(raw.get("name"))),
        file=_text(raw.get("short_filename")) or filename or None,
        line=line if isinstance(line, int) and not isinstance(line, bool) and 0 < line < (1 << 31) else None,
        args=p2p_args(raw),
    )


#: the frames whose locals are read at all: torch.distributed's own point-to-point functions (the model's calls,
#: and the P2POp a batch is made of)
P2P_FUNCTIONS = P2P_CALLS | {"P2POp.__init__", "P2POp.__new__"}
#: the file they live in (py-spy's `filename`, a path, ends so)
P2P_FILE = "torch/distributed/distributed_c10d.py"
#: the locals kept of those frames, and only as integers: every other local (a tensor's repr, a string, a
#: user's dict) may hold a secret and is dropped (docs/security.md)
P2P_ARG_NAMES = ("dst", "src", "group_dst", "group_src", "tag", "peer")
#: the largest value kept where no world size bounds it (a rank or a tag; a larger number is no rank of a job)
MAX_ARG = 1 << 20
#: most locals of one frame looked at (py-spy lists a frame's locals; a hostile file could list millions)
MAX_LOCALS = 64


def is_p2p_frame(raw: dict) -> bool:
    """A frame of py-spy's JSON in torch.distributed's own point-to-point functions: the only ones whose locals
    are read."""
    name, path = raw.get("name"), raw.get("filename")
    return isinstance(name, str) and name in P2P_FUNCTIONS and isinstance(path, str) and path.endswith(P2P_FILE)


def p2p_args(raw: dict, limit: int = MAX_ARG) -> tuple[tuple[str, int], ...]:
    """The allow-listed integer arguments of a torch.distributed point-to-point frame of py-spy's JSON (its
    `locals`, as `py-spy dump --locals` writes them: name and repr), each in [0, limit); () for any other frame.
    A repr is kept only as 1-7 decimal digits: 'None', '-1', '3.0', a string or an object is dropped."""
    if not is_p2p_frame(raw):
        return ()
    found = raw.get("locals")
    kept: dict[str, int] = {}
    for item in found[:MAX_LOCALS] if isinstance(found, list) else ():
        name = item.get("name") if isinstance(item, dict) else None
        text = item.get("repr") if name in P2P_ARG_NAMES else None
        if isinstance(text, str) and 0 < len(text) <= 7 and text.isascii() and text.isdigit() and int(text) < limit:
            kept.setdefault(name, int(text))
    return tuple(kept.items())
