"""Reads our second-look file (two looks at one rank a few seconds apart) into parsers.model.looks.SecondLook.

The file (written by forensics/collectors/second_look.py, name `second-look.json`):
    {"format": "hang-forensics-second-look", "version": 1, "pid": P, "rank": R,
     "requested_gap_s": S, "waited_s": W,
     "looks": [{"t": unix, "proc": {"state", "wchan", "cpu_ticks", "clock_ticks", "io": {"syscr", "syscw", ...},
                         "threads": [...]} | null,
                "stacks": [{"t", "threads": <py-spy dump --json>}...], "stack_errors": [...],
                "nccl_log": {"file", "size", "new_op_lines"}, "recorder": [{"comm", "coll_next", "p2p_next",
                "proxy_next", "completed", "max_seq", "newest_progress_ns", ...}]}, {...}]}
The input is hostile: every field is type-checked, counts are bounded, and what is malformed is
dropped (and said), never trusted.
"""

from __future__ import annotations

import math

from typing import Any

from parsers.input.errors import FileFormatError
from parsers.input.ints import as_int
from parsers.model.looks import Look, SecondLook, StackKey
from parsers.readers.ours import check_header, names_format
from parsers.readers.pyspy import PySpyFormatError, parse_pyspy_data

FORMAT = "hang-forensics-second-look"
VERSION = 1
MAX_DUMPS = 16  #: stack dumps read per look
MAX_FRAMES = 128
MAX_COMMS = 64
#: recorder counters that only grow when operations are recorded or make progress (heartbeats are not progress)
RECORDER_COUNTERS = ("coll_next", "p2p_next", "proxy_next", "completed", "newest_progress_ns")


def _num(value: Any) -> float | None:
    """A finite number from the file, else None (an integer too big for a float is no number here)."""
    if (isinstance(value, bool) or not isinstance(value, (int, float))
            or (isinstance(value, int) and abs(value) > 1 << 62)):
        return None
    return float(value) if math.isfinite(value) else None


#: a look's time: unix seconds between 1970 and 2286 (a time outside cannot be said as a date)
MAX_UNIX_S = 1e10


def _unix(value: Any) -> float | None:
    t = _num(value)
    return t if t is not None and 0 <= t < MAX_UNIX_S else None


def _int(value: Any, default: int = 0) -> int:
    """A counter of ours (never negative, 63 bits), else `default` (the file's own 'unknown')."""
    number = as_int(value, low=0, high=1 << 63)
    return default if number is None else number


def _main_stack(dump: Any, pid: int | None) -> StackKey | None:
    if not isinstance(dump, dict):
        return None
    try:
        threads = parse_pyspy_data(dump.get("threads"), pid)
    except (PySpyFormatError, TypeError, ValueError):
        return None
    main = next((th for th in threads if th.is_main), None)
    if main is None:
        return None
    return tuple((f.function[:200], (f.file or "")[:300], f.line or 0) for f in main.frames[:MAX_FRAMES])


def _look(raw: Any, pid: int | None, problems: list[str]) -> Look | None:
    if not isinstance(raw, dict) or _unix(raw.get("t")) is None:
        problems.append("a look without its time was dropped")
        return None
    proc = raw.get("proc") if isinstance(raw.get("proc"), dict) else None
    state = proc.get("state") if proc and isinstance(proc.get("state"), str) else None
    ticks = _int(proc.get("clock_ticks"), 100) if proc else 100
    cpu = _int(proc.get("cpu_ticks"), -1) if proc else -1
    dumps = raw.get("stacks") if isinstance(raw.get("stacks"), list) else []
    stacks = tuple(s for s in (_main_stack(d, pid) for d in dumps[:MAX_DUMPS]) if s is not None)
    errors = raw.get("stack_errors") if isinstance(raw.get("stack_errors"), list) else []
    log = raw.get("nccl_log") if isinstance(raw.get("nccl_log"), dict) else {}
    io = proc.get("io") if proc and isinstance(proc.get("io"), dict) else {}
    calls = _int(io.get("syscr"), -1), _int(io.get("syscw"), -1)
    rec = raw.get("recorder") if isinstance(raw.get("recorder"), list) else []
    counters = tuple((str(c.get("comm"))[:40], tuple(_int(c.get(k)) for k in RECORDER_COUNTERS))
                     for c in rec[:MAX_COMMS] if isinstance(c, dict) and c.get("comm") is not None and "error" not in c)
    return Look(t=_unix(raw["t"]), state=state[:1] if state else None,
                wchan=str(proc.get("wchan"))[:100] if proc and proc.get("wchan") else None,
                cpu_s=round(cpu / max(1, ticks), 3) if cpu >= 0 else None, stacks=stacks,
                io_calls=calls[0] + calls[1] if min(calls) >= 0 else None,
                stack_errors=tuple(str(e)[:300] for e in errors[:5]),
                log_size=_int(log.get("size"), -1) if "size" in log else None,
                new_op_lines=_int(log.get("new_op_lines")), recorder=counters)


def looks_like(text: str) -> bool:
    return names_format(text, FORMAT)


def parse_second_look_data(data: Any, pid: int | None = None) -> SecondLook:
    """SecondLook from the decoded JSON; ValueError when it is not our format or has no first look."""
    data = check_header(data, FORMAT, VERSION, "second-look")
    own_pid = data.get("pid") if isinstance(data.get("pid"), int) and not isinstance(data.get("pid"), bool) else pid
    rank = data.get("rank") if isinstance(data.get("rank"), int) and not isinstance(data.get("rank"), bool) else None
    raw = data.get("looks") if isinstance(data.get("looks"), list) else []
    problems: list[str] = []
    looks = [lk for lk in (_look(r, own_pid, problems) for r in raw[:2]) if lk is not None]
    if not looks:
        raise FileFormatError("second-look file without a readable look")
    first, second = looks[0], (looks[1] if len(looks) > 1 else None)
    if second is not None and second.t < first.t:
        problems.append("the second look is dated before the first: not compared")
        second = None
    requested = _num(data.get("requested_gap_s")) or 0.0
    return SecondLook(pid=own_pid, rank=rank, requested_s=requested, first=first, second=second,
                      problems=tuple(problems))
