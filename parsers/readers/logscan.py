"""Read only what a hang needs from big NCCL/PyTorch logs: the head, the tail, and what they point at.

Why: a 4,096-GPU job logging NCCL COLL lines for an hour leaves hundreds of millions of
op lines, and the per-line parser reads about 0.04-0.14 M lines/s here. A hang needs
(1) the head of each log: identity, NCCL version, communicator init and topology;
(2) the tail: the last operations per communicator and the errors that ended the run;
(3) now and then something in the middle: the init of a communicator created later
(a split, a subgroup) whose ops appear in the tail. So:

* `mode="head-tail"` (default): parse the first `head_bytes` and a tail window that grows
  backwards (doubling) until every communicator the file names has `ops_per_comm` ops in
  it, or `max_back_bytes` is reached; an op in the tail whose comm pointer was never
  initialised in what was read sends one backward byte search (`mmap.rfind`, C speed)
  for that pointer's init line, and the lines around it are parsed. The middle is
  otherwise not read: a WARN there is not seen (facts["scan"] says how many bytes
  were skipped, so a report can say so).
* `mode="full"`: every byte is looked at, but Python sees only the lines a bytes-level
  regex over the whole mapped file picks (every NCCL record that is not an op line, and
  every WARN); ops still come from the tail as above. This is the pre-filter: no
  Python code runs per op line.

The result is what the line readers (`nccl_log.parse_lines`, `rank_log.parse_lines`)
produce for the lines picked, in file order, with op events thinned to the last
`ops_per_comm` per (process, communicator). Line numbers of events after the head are
unknown (the middle is not counted) and set to None. Reads are bounded (`max_back_bytes`,
`max_lines`); the file is mapped read-only and never trusted.
"""

from __future__ import annotations

import mmap
import os
import re
from collections import defaultdict, deque
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Iterable

from parsers.model.events import OpEvent, Parsed
from parsers.readers import nccl_log, rank_log

HEAD_BYTES = 256 * 1024
TAIL_BYTES = 256 * 1024
MAX_BACK_BYTES = 64 * 1024 * 1024
OPS_PER_COMM = 8
MAX_LINES = 2_000_000  #: lines handed to a line reader from one file, whatever the mode
MAX_BACK_SEARCHES = 256
MAX_LINE_BYTES = 64 * 1024  #: a line longer than this is cut where the search stopped  #: init look-ups for unknown comm pointers per file

#: one op record: '<host>:<pid>:<tid> [dev] NCCL INFO AllReduce: opCount a ... comm 0x..'
_OP = re.compile(rb":(\d+):\d+ \[[^\]\n]*\] NCCL INFO [A-Za-z]+: opCount [0-9a-f]+ [^\n]{0,200}? comm (0x[0-9a-f]+)")
_OP_START = re.compile(rb"NCCL INFO [A-Za-z]+: opCount ")
#: records Python must see in a full scan: any NCCL record but an op line, and NCCL version lines
_NOT_OP = re.compile(rb"NCCL (?:INFO (?![A-Za-z]+: opCount )|WARN|TRACE|ABORT|version)")
_INIT_PTR = re.compile(rb"comm (0x[0-9a-f]+) rank \d+ nranks \d+ cudaDev [^\n]{0,300}?Init")  #: init lines only (not nRanks, not Abort)
_PTR_NAME = re.compile(r"^ptr:(\d+):(0x[0-9a-f]+)$")

Reader = Callable[[Iterable[str], str | None], Parsed]


@dataclass
class _Plan:
    """Byte ranges of the file to parse, in file order."""

    head_end: int
    tail_start: int
    middle: list[tuple[int, int]]


def scan_file(path: Path | str, kind: str = "nccl-log", mode: str = "head-tail", head_bytes: int = HEAD_BYTES,
              tail_bytes: int = TAIL_BYTES, ops_per_comm: int = OPS_PER_COMM,
              max_back_bytes: int = MAX_BACK_BYTES) -> Parsed:
    """Events a hang needs from one log file (see module doc). `kind`: 'nccl-log' or 'rank-log'."""
    reader = _reader(kind)
    if mode not in ("head-tail", "full"):
        raise ValueError(f"unknown scan mode {mode!r}")
    path = str(path)
    with open(path, "rb") as fh:
        size = os.fstat(fh.fileno()).st_size
        if size == 0:
            return reader([], path)
        if size <= head_bytes + tail_bytes and mode != "full":
            data = fh.read(size)
            return _finish(reader(_decode_lines(data), path), ops_per_comm, {"mode": "whole", "bytes_read": size,
                                                                             "skipped_bytes": 0}, None)
        with mmap.mmap(fh.fileno(), 0, access=mmap.ACCESS_READ) as mm:
            return _scan(mm, size, path, reader, mode, head_bytes, tail_bytes, ops_per_comm, max_back_bytes)


def _reader(kind: str) -> Reader:
    if kind == "nccl-log":
        return nccl_log.parse_lines
    if kind == "rank-log":
        return rank_log.parse_lines
    raise ValueError(f"logscan reads nccl-log and rank-log, not {kind!r}")


def _scan(mm: mmap.mmap, size: int, path: str, reader: Reader, mode: str, head_bytes: int, tail_bytes: int,
          ops_per_comm: int, max_back_bytes: int) -> Parsed:
    if mode not in ("head-tail", "full"):
        raise ValueError(f"unknown scan mode {mode!r}")
    nccl = reader is nccl_log.parse_lines
    head_end = _line_end(mm, min(head_bytes, size))
    known = set(_INIT_PTR.findall(mm, 0, head_end))  # comm pointers initialised in the head
    middle: list[tuple[int, int]] = []
    if mode == "full":
        middle = _prefilter(mm, head_end, size) if nccl else _not_op_lines(mm, head_end, size)
    known |= {p for a, b in middle for p in _INIT_PTR.findall(mm, a, b)}
    tail_start = _tail_start(mm, size, head_end, known, tail_bytes, ops_per_comm, max_back_bytes)
    known |= set(_INIT_PTR.findall(mm, tail_start, size))
    plan = _Plan(head_end, tail_start, middle)
    _back_search(mm, plan, known, nccl)
    if nccl and tail_start > head_end:
        # NCCL-only file, middle not covered: Python sees the records that are not op lines,
        # and of the op lines only the last `ops_per_comm` per (pid, comm) of the tail
        picked = [*_prefilter(mm, 0, head_end), *plan.middle, *_prefilter(mm, tail_start, size),
                  *_last_ops(mm, tail_start, size, ops_per_comm)]
    else:
        picked = [(0, head_end), *plan.middle, (tail_start, size)]
    ranges = _merge(picked)
    read = (head_end + size - tail_start + sum(b - a for a, b in _merge(plan.middle))) if mode != "full" else size
    info = {"mode": mode, "bytes_read": min(read, size), "parsed_bytes": sum(b - a for a, b in ranges),
            "skipped_bytes": max(0, size - read), "size": size}
    parsed = reader(_lines_of(mm, ranges), path)
    return _finish(parsed, ops_per_comm, info, mm[:head_end].count(b"\n"))


def _last_ops(mm: mmap.mmap, start: int, end: int, keep: int) -> list[tuple[int, int]]:
    """Line ranges of the last `keep` op records per (pid, comm pointer) between start and end."""
    last: dict[tuple[bytes, bytes], deque] = defaultdict(lambda: deque(maxlen=keep))
    for m in _OP.finditer(mm, start, end):
        last[(m.group(1), m.group(2))].append(m.start())
    return [(_line_start(mm, pos, start), _line_end(mm, pos + 1)) for q in last.values() for pos in q]


def _line_end(mm: mmap.mmap, pos: int) -> int:
    """End (exclusive) of the line holding byte pos-1, searched at most MAX_LINE_BYTES ahead."""
    if pos >= len(mm):
        return len(mm)
    start = pos - 1 if pos else 0
    nl = mm.find(b"\n", start, start + MAX_LINE_BYTES)
    return min(len(mm), start + MAX_LINE_BYTES) if nl < 0 else nl + 1


def _line_start(mm: mmap.mmap, pos: int, floor: int = 0) -> int:
    """Start of the line holding byte pos, searched at most MAX_LINE_BYTES back (a hole or a
    binary blob must not send the search through the whole file); else pos itself, and the
    reader resynchronises on the next record."""
    lo = max(floor, pos - MAX_LINE_BYTES)
    nl = mm.rfind(b"\n", lo, pos)
    if nl >= 0:
        return nl + 1
    return floor if lo == floor else pos


def _tail_start(mm: mmap.mmap, size: int, head_end: int, known: set[bytes], tail_bytes: int, need: int,
                max_back: int) -> int:
    """Grow the tail window backwards (doubling) until each comm has `need` ops in it, or its
    init line is inside the window (a comm with fewer ops than that must not cost a full read)."""
    window = tail_bytes
    while True:
        start = max(head_end, _line_start(mm, size - window, head_end))
        if start <= head_end:
            return head_end
        counts: dict[bytes, int] = defaultdict(int)
        for _pid, ptr in _OP.findall(mm, start, size):
            counts[ptr] += 1
        wanted = known | set(counts)
        born = set(_INIT_PTR.findall(mm, start, size))  # no op of a comm comes before its init line
        if all(counts.get(p, 0) >= need or p in born for p in wanted) or window >= max_back:
            return start
        window *= 2


def _back_search(mm: mmap.mmap, plan: _Plan, known: set[bytes], nccl: bool) -> None:
    """Comm pointers used in the tail but initialised nowhere read: find each init line, backwards."""
    used = {ptr for _pid, ptr in _OP.findall(mm, plan.tail_start, len(mm))}
    for ptr in sorted(used - known)[:MAX_BACK_SEARCHES]:
        pos = mm.rfind(b"comm " + ptr + b" rank ", plan.head_end, plan.tail_start)
        if pos < 0:
            continue
        # the init START line, topology and Init COMPLETE sit together: take the lines around it
        a = _line_start(mm, max(plan.head_end, pos - 64 * 1024), plan.head_end)
        b = min(plan.tail_start, _line_end(mm, pos + 64 * 1024))
        plan.middle.extend(_prefilter(mm, a, b) if nccl else [(a, b)])


def _prefilter(mm: mmap.mmap, start: int, end: int) -> list[tuple[int, int]]:
    """Line ranges between start and end holding a record that is not an op line (bytes regex)."""
    out: list[tuple[int, int]] = []
    last_end = -1
    for m in _NOT_OP.finditer(mm, start, end):
        if m.start() < last_end:
            continue  # a second match on a line already taken
        a = _line_start(mm, m.start(), start)
        b = min(end, _line_end(mm, m.end()))
        out.append((a, b))
        last_end = b
        if len(out) >= MAX_LINES:
            break
    return out


def _not_op_lines(mm: mmap.mmap, start: int, end: int) -> list[tuple[int, int]]:
    """Rank logs (c10d, gloo, tracebacks, prints): every line but NCCL op lines, which are
    found by a bytes search; runs of op lines are skipped as one (Python per op line, not
    per character: slower than _prefilter, which NCCL-only files get)."""
    out: list[tuple[int, int]] = []
    pos = start
    for m in _OP_START.finditer(mm, start, end):
        if m.start() < pos:
            continue
        a = _line_start(mm, m.start(), start)
        b = min(end, _line_end(mm, m.end()))
        if a > pos:
            out.append((pos, a))
        pos = b
        if len(out) >= MAX_LINES:
            return out
    if pos < end:
        out.append((pos, end))
    return out


def _merge(ranges: list[tuple[int, int]]) -> list[tuple[int, int]]:
    out: list[tuple[int, int]] = []
    for a, b in sorted(r for r in ranges if r[1] > r[0]):
        if out and a <= out[-1][1]:
            out[-1] = (out[-1][0], max(out[-1][1], b))
        else:
            out.append((a, b))
    return out


def _lines_of(mm: mmap.mmap, ranges: list[tuple[int, int]]) -> Iterable[str]:
    """Decoded lines of the ranges, in order, at most MAX_LINES."""
    n = 0
    for a, b in ranges:
        for line in _decode_lines(mm[a:b]):
            yield line
            n += 1
            if n >= MAX_LINES:
                return


def _decode_lines(data: bytes) -> list[str]:
    """Split on \\n only (as the registry reads text: a stray \\r must not split a record)."""
    text = data.decode("utf-8", errors="replace")
    lines = text.split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    return [ln + "\n" for ln in lines]


def _finish(parsed: Parsed, keep: int, info: dict, head_lines: int | None) -> Parsed:
    """Thin op events to the last `keep` per (pid, comm); lines after the head lose their number."""
    last: dict[tuple, deque] = defaultdict(lambda: deque(maxlen=keep))
    total: dict[tuple, int] = defaultdict(int)
    for i, ev in enumerate(parsed.events):
        if isinstance(ev, OpEvent):
            key = (ev.origin.pid, ev.origin.rank, ev.comm)
            last[key].append(i)
            total[key] += 1
    kept = {i for q in last.values() for i in q}
    parsed.events = [ev for i, ev in enumerate(parsed.events) if not isinstance(ev, OpEvent) or i in kept]
    if head_lines is not None:
        for ev in parsed.events:
            origin = getattr(ev, "origin", None)
            if origin is not None and origin.line is not None and origin.line > head_lines:
                origin.line = None
    info["ops_parsed"] = sum(total.values())
    info["ops_kept"] = len(kept)
    parsed.facts["scan"] = info
    return parsed
