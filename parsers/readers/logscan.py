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

Disk reads are bounded too: in head-tail mode the file is mapped MADV_RANDOM (no read-around:
this machine's disk reads ahead 8 MB, which made two touches read half a 24 MB log) and every
range about to be searched is asked for first (MADV_WILLNEED), so the disk reads the head, the
tail window and the steps of a backward search, nothing else (parsers.gather.evidence also asks for
the next files' heads and tails while one is parsed).

The result is what the line readers (`nccl_log.parse_pairs`, `rank_log.parse_pairs`)
produce for the lines picked, in file order, with op events thinned to the last
`ops_per_comm` per (process, communicator). A full scan of a file up to NUMBERED_BYTES keeps
every event's real line number (newlines between the picked ranges are counted in C);
otherwise line numbers of events after the head are unknown (the middle is not counted, or
not read) and set to None. Reads
are bounded (`max_back_bytes`, `max_lines`); the file is mapped read-only and never trusted.
"""

from __future__ import annotations

import mmap
import os
import re
from collections import Counter, defaultdict, deque
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Iterable

from parsers.input import safeio
from parsers.model.events import OpEvent, Parsed
from parsers.readers import nccl_log, rank_log

HEAD_BYTES = 256 * 1024
TAIL_BYTES = 256 * 1024
MAX_BACK_BYTES = 64 * 1024 * 1024
#: the last ops kept per (process, communicator): a hang needs a few, stragglers from COLL stamps dozens
OPS_PER_COMM = 32
MAX_LINES = 2_000_000  #: lines handed to a line reader from one file, whatever the mode
MAX_BACK_SEARCHES = 256  #: init look-ups for unknown comm pointers per file
LINE_SLACK = 4096  #: bytes asked for beyond a window: the line a window's edge cuts
BACK_CHUNK = 256 * 1024  #: first step of a backward search for an init line (doubling)
LAST_OPS_CHUNK = 16 * 1024  #: bytes per step of the backward walk for the last ops of each comm
MAX_LINE_BYTES = 64 * 1024  #: a line longer than this is cut where the search stopped
COUNT_CHUNK = 1 << 20  #: bytes per slice when counting newlines
#: a full scan of a file up to this size numbers its lines. Why a bound: counting newlines costs
#: 0.57 s a GB here, +60% on a full scan of a 1 GB log (0.97 -> 1.55 s); up to 64 MB it is <= 40 ms
NUMBERED_BYTES = 64 * 1024 * 1024

#: one op record: '<host>:<pid>:<tid> [dev] NCCL INFO AllReduce: opCount a ... comm 0x..'. The device field is
#: bounded as in nccl_log's prefix (32; NCCL prints the CUDA device number there): an open `[^\]\n]*` scanned to
#: the line's end from every ':0:0 [' of a long line, which is quadratic (issue 31)
_OP = re.compile(rb":(\d+):\d+ \[[^\]\n]{0,32}\] NCCL INFO [A-Za-z]+: opCount [0-9a-f]+ [^\n]{0,200}? "
                 rb"comm (0x[0-9a-f]+)")
_OP_START = re.compile(rb"NCCL INFO [A-Za-z]+: opCount ")
#: records Python must see in a full scan: any NCCL record but an op line, and NCCL version lines
_NOT_OP = re.compile(rb"NCCL (?:INFO (?![A-Za-z]+: opCount )|WARN|TRACE|ABORT|version)")
#: init lines only (not nRanks, not Abort)
_INIT_PTR = re.compile(rb"comm (0x[0-9a-f]+) rank \d+ nranks \d+ cudaDev [^\n]{0,300}?Init")
_PTR_NAME = re.compile(r"^ptr:(\d+):(0x[0-9a-f]+)$")

Reader = Callable[[Iterable[tuple[int, str]], str | None], Parsed]  #: a line reader's parse_pairs


@dataclass
class _Plan:
    """Byte ranges of the file to parse, in file order."""

    head_end: int
    tail_start: int
    middle: list[tuple[int, int]]
    searched: int = 0  #: bytes the backward searches for init lines went through


def scan_file(path: Path | str, kind: str = "nccl-log", mode: str = "head-tail", head_bytes: int = HEAD_BYTES,
              tail_bytes: int = TAIL_BYTES, ops_per_comm: int = OPS_PER_COMM,
              max_back_bytes: int = MAX_BACK_BYTES) -> Parsed:
    """Events a hang needs from one log file (see module doc). `kind`: 'nccl-log' or 'rank-log'."""
    reader = _reader(kind)
    if mode not in ("head-tail", "full"):
        raise ValueError(f"unknown scan mode {mode!r}")
    path = str(path)
    with safeio.open_regular(path, follow=False) as fh:  # a FIFO or link put there since the sniff: refused
        size = os.fstat(fh.fileno()).st_size
        if size == 0:
            return reader([], path)
        if size <= head_bytes + tail_bytes and mode != "full":
            data = fh.read(size)
            info = {"mode": "whole", "bytes_read": size, "skipped_bytes": 0}
            return _finish(reader(enumerate(_decode_lines(data), 1), path), ops_per_comm, info, None)
        with mmap.mmap(fh.fileno(), 0, access=mmap.ACCESS_READ) as mm:
            if mode == "full":
                _advise(mm, "MADV_SEQUENTIAL", 0, size)
            else:
                _advise(mm, "MADV_RANDOM", 0, size)  # see _advise: no read-around of the middle
                _advise(mm, "MADV_WILLNEED", 0, head_bytes + LINE_SLACK)
                _advise(mm, "MADV_WILLNEED", size - tail_bytes - LINE_SLACK, size)
            return _scan(mm, size, path, reader, mode, head_bytes, tail_bytes, ops_per_comm, max_back_bytes)


def _advise(mm: mmap.mmap, advice: str, start: int, end: int) -> None:
    """madvise a byte range (page-aligned here), where the platform has it.

    Why: a fault in a mapped file makes the kernel read around it, up to the device's
    read-ahead (8 MB on this machine's disk), so touching a 24 MB log at both ends read half
    of it. In head-tail mode the mapping is MADV_RANDOM (a fault reads its page only) and
    each range the scan is about to search is asked for first with MADV_WILLNEED (one
    read of exactly that range, issued before the search faults on it)."""
    flag = getattr(mmap, advice, None)
    if flag is None or not hasattr(mm, "madvise"):
        return
    start = max(0, start) & ~(mmap.PAGESIZE - 1)
    end = min(len(mm), end)
    if end > start:
        try:
            mm.madvise(flag, start, end - start)
        except OSError:  # advice only: never a reason to fail a read
            pass


def _reader(kind: str) -> Reader:
    if kind == "nccl-log":
        return nccl_log.parse_pairs
    if kind == "rank-log":
        return rank_log.parse_pairs
    raise ValueError(f"logscan reads nccl-log and rank-log, not {kind!r}")


def _scan(mm: mmap.mmap, size: int, path: str, reader: Reader, mode: str, head_bytes: int, tail_bytes: int,
          ops_per_comm: int, max_back_bytes: int) -> Parsed:
    if mode not in ("head-tail", "full"):
        raise ValueError(f"unknown scan mode {mode!r}")
    nccl = reader is nccl_log.parse_pairs
    head_end = _line_end(mm, min(head_bytes, size))
    known = set(_INIT_PTR.findall(mm, 0, head_end))  # comm pointers initialised in the head
    middle: list[tuple[int, int]] = []
    if mode == "full":
        middle = _prefilter(mm, head_end, size) if nccl else _not_op_lines(mm, head_end, size)
    known |= {p for a, b in middle for p in _INIT_PTR.findall(mm, a, b)}
    tail = _tail_window(mm, size, head_end, known, tail_bytes, ops_per_comm, max_back_bytes)
    tail_start = tail.start
    known |= tail.born
    plan = _Plan(head_end, tail_start, middle)
    _back_search(mm, plan, known, nccl, {ptr for _pid, ptr in tail.ops})
    if nccl:
        # NCCL-only file: Python sees the records that are not op lines, and of the op lines only the
        # last `ops_per_comm` per (pid, comm) of the tail; a tail window that reached the head makes
        # the whole file the tail (a mid-size log: its op lines were most of its parse, 30 ms a 0.5 MB log)
        ops, last_from = tail.ops, tail_start
        if tail_start <= head_end:
            ops, last_from = tail.ops + Counter(_OP.findall(mm, 0, head_end)), 0
        picked = [*_prefilter(mm, 0, head_end), *plan.middle, *_prefilter(mm, tail_start, size),
                  *_last_ops(mm, last_from, size, ops_per_comm, ops)]
    else:
        picked = [(0, head_end), *plan.middle, (tail_start, size)]
    ranges = _merge(picked)
    read = (head_end + size - tail_start + max(plan.searched, sum(b - a for a, b in _merge(plan.middle))))
    read = read if mode != "full" else size
    info = {"mode": mode, "bytes_read": min(read, size), "parsed_bytes": sum(b - a for a, b in ranges),
            "skipped_bytes": max(0, size - read), "size": size}
    if mode == "full" and size <= NUMBERED_BYTES:  # one more C pass numbers the lines picked
        parsed = reader(_numbered_lines(mm, ranges), path)
        return _finish(parsed, ops_per_comm, info, None)
    parsed = reader(enumerate(_lines_of(mm, ranges), 1), path)
    return _finish(parsed, ops_per_comm, info, _newlines(mm, 0, head_end))


def _last_ops(mm: mmap.mmap, start: int, end: int, keep: int, ops: Counter) -> list[tuple[int, int]]:
    """Line ranges of the last `keep` op records per (pid, comm pointer) between start and end.

    Why backwards in chunks: `ops` (counted at C speed by _tail_window) says how many records
    each key has, so the walk from the end stops as soon as every key has its last `keep`; in an
    interleaved tail that is the first chunk, where a forward pass makes a match object for
    each of thousands of op lines. A chunk is scanned by the regex, never line by line in
    Python, so a NUL fill or a hole at the end costs C time only."""
    want = {key: min(keep, n) for key, n in ops.items()}
    missing = sum(want.values())
    out: list[tuple[int, int]] = []
    hi = end
    while missing and hi > start:
        # never a position below `start` (a negative end makes mmap.rfind count from the file's end, and the
        # walk went forward again, for ever); `lo` < `hi` always, so every step moves back
        pos = max(start, hi - LAST_OPS_CHUNK)
        lo = _line_start(mm, pos, start) if pos > start else start
        for m in reversed(list(_OP.finditer(mm, lo, hi))):
            key = (m.group(1), m.group(2))
            if want.get(key, 0) > 0:
                want[key] -= 1
                missing -= 1
                out.append((_line_start(mm, m.start(), lo), _line_end(mm, m.start() + 1)))
        hi = lo
    return out


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
    cut = _boundary(mm, lo, pos)
    if cut >= 0:
        return cut + 1
    return floor if lo == floor else pos


def _boundary(mm: mmap.mmap, lo: int, pos: int) -> int:
    """The last newline or NUL byte in [lo, pos), or -1. Why NUL too: a sparse hole or the zero
    fill a file system leaves after a crash holds no record, and a 'line' of 64 KB of NULs in
    front of the next record costs every line regex a 64 KB walk."""
    nl = mm.rfind(b"\n", lo, pos)
    return max(nl, mm.rfind(b"\x00", max(lo, nl), pos))


@dataclass
class _Tail:
    """The tail window: where it starts, the op records in it, the comm pointers initialised in it."""

    start: int
    ops: Counter  #: (pid, comm pointer) -> op records in the window
    born: set[bytes]


def _tail_window(mm: mmap.mmap, size: int, head_end: int, known: set[bytes], tail_bytes: int, need: int,
                 max_back: int) -> _Tail:
    """Grow the tail window backwards (doubling) until each comm has `need` ops in it, or its
    init line is inside the window (a comm with fewer ops than that must not cost a full read).

    Each growth scans only the bytes it adds (the window grows from line starts, and no record
    crosses a line), and ops are counted by `findall` into a Counter: no Python per op line."""
    window = tail_bytes
    ops: Counter = Counter()
    born: set[bytes] = set()
    scanned = size
    while True:
        if window > tail_bytes:
            _advise(mm, "MADV_WILLNEED", size - window - LINE_SLACK, scanned)
        start = max(head_end, _line_start(mm, size - window, head_end))
        if start < scanned:
            ops.update(_OP.findall(mm, start, scanned))
            born.update(_INIT_PTR.findall(mm, start, scanned))  # no op of a comm comes before its init line
            scanned = start
        if start <= head_end:
            return _Tail(head_end, ops, born)
        counts: Counter = Counter()
        for (_pid, ptr), n in ops.items():
            counts[ptr] += n
        if all(counts[p] >= need or p in born for p in known | set(counts)) or window >= max_back:
            return _Tail(start, ops, born)
        window *= 2


def _back_search(mm: mmap.mmap, plan: _Plan, known: set[bytes], nccl: bool, used: set[bytes]) -> None:
    """Comm pointers used in the tail but initialised nowhere read: find each init line, backwards."""
    for ptr in sorted(used - known)[:MAX_BACK_SEARCHES]:
        pos, searched = _rfind_back(mm, b"comm " + ptr + b" rank ", plan.head_end, plan.tail_start)
        plan.searched = max(plan.searched, searched)  # each search starts at the tail: the farthest one counts
        if pos < 0:
            continue
        # the init START line, topology and Init COMPLETE sit together: take the lines around it
        _advise(mm, "MADV_WILLNEED", pos - 64 * 1024 - LINE_SLACK, pos + 64 * 1024 + LINE_SLACK)
        a = _line_start(mm, max(plan.head_end, pos - 64 * 1024), plan.head_end)
        b = min(plan.tail_start, _line_end(mm, pos + 64 * 1024))
        plan.middle.extend(_prefilter(mm, a, b) if nccl else [(a, b)])


def _rfind_back(mm: mmap.mmap, needle: bytes, lo: int, hi: int) -> tuple[int, int]:
    """(mm.rfind(needle, lo, hi), bytes searched), in steps backwards from hi that double from
    BACK_CHUNK, each step's bytes asked for before it is searched: an init line just before the
    tail costs one small read, one at the start of the file a few large ones, never 4 KB faults."""
    step, top = BACK_CHUNK, hi
    while hi > lo:
        a = max(lo, hi - step)
        _advise(mm, "MADV_WILLNEED", a, hi)
        pos = mm.rfind(needle, a, min(top, hi + len(needle) - 1))  # a needle across the step's edge
        if pos >= 0:
            return pos, top - a
        hi, step = a, step * 2
    return -1, top - lo


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


def _numbered_lines(mm: mmap.mmap, ranges: list[tuple[int, int]]) -> Iterable[tuple[int, str]]:
    """(line number, line) of the ranges, in order, at most MAX_LINES: each range's first number
    is the newlines before it plus one, counted at C speed over the bytes between ranges."""
    n, before, pos = 0, 0, 0
    for a, b in ranges:
        before += _newlines(mm, pos, a)
        pos = a
        for i, line in enumerate(_decode_lines(mm[a:b]), before + 1):
            yield i, line
            n += 1
            if n >= MAX_LINES:
                return


def _newlines(mm: mmap.mmap, start: int, end: int) -> int:
    """Newlines in mm[start:end], counted in chunks (mmap has no count; a slice copies)."""
    n = 0
    for a in range(start, end, COUNT_CHUNK):
        n += mm[a:min(end, a + COUNT_CHUNK)].count(b"\n")
    return n


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
