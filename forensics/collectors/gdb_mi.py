"""gdb's machine-interface output read as it comes, each line kept within a cap.

Why not pygdbmi's IoManager: it reads whatever is ready and joins it to what it holds until a line ends, so one
answer is held whole (and joined again for each chunk) before any cap looks at it. `-thread-info` is one line of
about 400 bytes a thread: a target with 100,000 threads (any user may start one, and give it RANK) made gdb's
answer tens of MB, all of it in collect's memory. Here a line is kept only up to its cap (`Cap`: bytes, and items
of the answer's list); past it the line's items (threads, frames) are only counted as the bytes go by, and the
whole items before the cut are made a well-formed answer again (the list closed) for pygdbmi's parser.
"""

from __future__ import annotations

import os
import re
import selectors
import time
from collections import deque
from dataclasses import dataclass
from typing import IO, Any

THREAD_ITEM = b'{id="'  #: how each thread of `-thread-info`'s list begins
FRAME_ITEM = b'frame={level="'  #: how each frame of `-stack-list-frames`'s list begins
TAIL_LINES = 50  #: gdb's last console and stderr lines kept (why it failed)
TAIL_CHARS = 1000  #: of each such line
_CHUNK = 1 << 16
_RESULT_HEAD = re.compile(rb"(\d{1,12})\^([a-z-]{1,16})")


@dataclass(frozen=True)
class Cap:
    """What one MI line may keep: `size` bytes and `items` items of its list, each beginning with `marker`.

    A marker never overlaps itself (no suffix of it is also its prefix) and gdb never writes it inside a quoted
    string (a `"` there is escaped as `\\"`), so counting it counts the list's items."""

    marker: bytes
    items: int
    size: int


class CappedLine:
    """One MI line as it comes: kept while within its cap; past it, its items only counted."""

    def __init__(self, cap: Cap) -> None:
        self.cap = cap
        self.kept = bytearray()
        self.starts: list[int] = []  #: where each of the first cap.items + 1 items begins in `kept`
        self.size = 0  #: bytes of the whole line
        self.cut_at: int | None = None  #: where `kept` was cut (an item's start), once past the cap
        self._after = 0  #: items that began after the cut
        self._tail = b""  #: last bytes after the cut (a marker split between two reads)
        self._head: bytes | None = None  #: the result's token and class, of a line cut before any item began

    @property
    def items(self) -> int:
        """Items of the whole line's list, kept or not."""
        return len(self.starts) + self._after

    def feed(self, data: bytes) -> None:
        """Take the next bytes of the line (no line end in them)."""
        self.size += len(data)
        if self.cut_at is not None:
            self._count(data)
            return
        marker, begin = self.cap.marker, len(self.kept)
        self.kept += data
        pos = self.kept.find(marker, max(0, begin - len(marker) + 1))
        while pos >= 0 and len(self.starts) <= self.cap.items:
            self.starts.append(pos)
            pos = self.kept.find(marker, pos + len(marker))
        over = len(self.starts) > self.cap.items  # an item past the cap begins: keep those before it
        if over or len(self.kept) > self.cap.size:
            at = self.starts[self.cap.items] if over else len(self.kept)
            if at > self.cap.size:  # and only the whole items within the bytes
                fits = [s for s in self.starts if s <= self.cap.size]
                at = fits[-1] if fits else (self.starts[0] if self.starts else 0)
            self._cut(at)

    def _cut(self, at: int) -> None:
        if not self.starts:  # no item began: only the result's token and class are kept (text())
            head = _RESULT_HEAD.match(self.kept)
            self._head = head[0] if head else b""
        rest = bytes(self.kept[at:])
        self.starts = [s for s in self.starts if s < at]
        del self.kept[at:]
        self.cut_at = at
        self._count(rest)

    def _count(self, data: bytes) -> None:
        joined = self._tail + data
        self._after += joined.count(self.cap.marker)
        self._tail = joined[-(len(self.cap.marker) - 1):]

    def text(self) -> str:
        """The line, or its whole items before the cut with the list closed (an empty list when not one fit); of a
        line cut where no item began, its result's token and class alone (`107^error`): a cut string is never
        handed to pygdbmi, whose unescaping rescans an unclosed string from each of its characters."""
        if self.cut_at is None:
            return self.kept.decode("utf-8", "replace")
        if self._head is not None:
            return self._head.decode("ascii")
        head = bytes(self.kept)
        if not head.endswith(b"["):
            head = head.rstrip(b",")
        return (head + b"]").decode("utf-8", "replace")


@dataclass
class Record:
    """One parsed MI record and how much of its line was kept."""

    record: dict[str, Any]
    size: int  #: bytes of the whole line
    items: int  #: items of its list, kept or not
    cut: bool  #: its list was cut at the cap


class MiReader:
    """gdb's stdout as capped MI records, and its stderr as a short tail, read without blocking as they come."""

    def __init__(self, stdout: IO[bytes], stderr: IO[bytes], cap: Cap) -> None:
        self.cap = cap  #: the cap a line begun from now on is kept within (the caller sets it per command)
        self.tail: deque[str] = deque(maxlen=TAIL_LINES)  #: gdb's last console and stderr lines
        self._out, self._err = stdout.fileno(), stderr.fileno()
        self._line: CappedLine | None = None
        self._err_line = bytearray()
        self._sel = selectors.DefaultSelector()
        for fd in (self._out, self._err):
            os.set_blocking(fd, False)
            self._sel.register(fd, selectors.EVENT_READ)

    def read(self, timeout: float) -> list[Record]:
        """The records whose lines end within `timeout` seconds (none when gdb says nothing)."""
        records: list[Record] = []
        end = time.monotonic() + max(0.0, timeout)
        if not self._sel.get_map():  # both pipes closed: nothing more will come (the caller sees gdb's exit)
            time.sleep(max(0.0, min(timeout, 0.05)))
        while not records and self._sel.get_map():
            left = end - time.monotonic()
            events = self._sel.select(max(0.0, left))
            for key, _ in events:
                try:
                    chunk = os.read(key.fd, _CHUNK)
                except BlockingIOError:
                    continue
                if not chunk:
                    self._sel.unregister(key.fd)
                elif key.fd == self._out:
                    records.extend(self._take(chunk))
                else:
                    self._take_err(chunk)
            if left <= 0:
                break
        return records

    def _take(self, chunk: bytes) -> list[Record]:
        records = []
        for n, piece in enumerate(chunk.split(b"\n")):
            if n and self._line is not None:  # a line end came before this piece
                records.extend(self._finish(self._line))
                self._line = None
            if piece:
                self._line = self._line or CappedLine(self.cap)
                self._line.feed(piece)
        return records

    def _finish(self, line: CappedLine) -> list[Record]:
        from pygdbmi.gdbmiparser import parse_response

        text = line.text().rstrip("\r")
        if not text or text.startswith("(gdb)"):
            return []
        try:
            record = parse_response(text)
        except (ValueError, IndexError, KeyError, TypeError, AssertionError, RecursionError):
            return []  # not an MI record gdb would write: nothing to take from it
        if record.get("type") in ("console", "log") and record.get("payload"):
            self.tail.append(str(record["payload"])[:TAIL_CHARS])
        return [Record(record, line.size, line.items, line.cut_at is not None)]

    def _take_err(self, chunk: bytes) -> None:
        for n, piece in enumerate(chunk.split(b"\n")):
            if n and self._err_line:
                self.tail.append(self._err_line.decode("utf-8", "replace")[:TAIL_CHARS])
                self._err_line.clear()
            self._err_line += piece[:max(0, TAIL_CHARS * 4 - len(self._err_line))]

    def close(self) -> None:
        self._sel.close()
