"""Byte caps of one collection: bytes it may write in all, and per rank.

Every cap on a single file (a log's 8 MiB tail, a 256 MiB Flight Recorder dump, a
64 MiB recorder file) still let a target that names many files make one collection
write gigabytes: sixteen sparse 256 MiB dumps (no disk space for the target, sizes
taken from st_size) made one rank's collection write 4.1 GB. So each copy first
reserves its bytes here, from the rank's budget and the collection's at once, sized
by the file's apparent size (st_size: sparse files count whole), and what a cap
keeps out is said: in the collector's record and in the manifest's notes. The host-wide
files (kernel log, nvidia-smi, df, sysfs copies, the host's digest) have a budget of their own
(HOST_BYTES, collect --host-max-mib) that draws on the collection's the way a rank's does.
"""

from __future__ import annotations

import json
import os
import threading

from forensics import safefs
from parsers.input.cutmark import cut_line

MiB = 1 << 20
RANK_BYTES = 512 * MiB  #: bytes one rank's evidence may take
TOTAL_BYTES = 2048 * MiB  #: bytes one collection (one host) may take
#: bytes the host-wide files may take (kernel log, nvidia-smi, df, sysfs copies, the host's digest), drawn on the
#: collection's too: a real host writes a few MiB (the kernel log's tail is 8 MiB at most); a kernel log of GBs or
#: a flood of lines was written whole, outside every cap
HOST_BYTES = 256 * MiB


class ByteBudget:
    """Bytes still allowed; a rank's budget draws on its collection's (`parent`) too.

    Thread-safe: ranks are collected in parallel and share the collection's budget.
    """

    def __init__(self, limit: int, label: str, parent: "ByteBudget | None" = None) -> None:
        self.limit = max(0, int(limit))
        self.label = label
        self.parent = parent
        self.used = 0
        self.cuts: list[str] = [] if parent is None else parent.cuts  #: what caps kept out, collection-wide
        self._lock: threading.Lock = parent._lock if parent is not None else threading.Lock()

    def _left(self) -> int:
        own = self.limit - self.used
        return own if self.parent is None else min(own, self.parent._left())

    @property
    def left(self) -> int:
        with self._lock:
            return max(0, self._left())

    def reserve(self, want: int) -> int:
        """Hold up to `want` bytes (fewer when a cap is near); settle() gives back what was not used."""
        with self._lock:
            granted = max(0, min(int(want), self._left()))
            self._charge(granted)
            return granted

    def settle(self, granted: int, used: int) -> None:
        """A copy that was granted `granted` bytes wrote `used` (a redacted text may differ a little)."""
        with self._lock:
            self._charge(int(used) - int(granted))

    def _charge(self, n: int) -> None:
        budget = self
        while budget is not None:
            budget.used += n
            budget = budget.parent

    def which(self) -> str:
        """The cap that is (nearly) spent: this rank's or the whole collection's."""
        with self._lock:
            if self.parent is not None and self.parent.limit - self.parent.used <= self.limit - self.used:
                return f"{self.parent.label} cap of {cap_words(self.parent.limit)}"
            return f"{self.label} cap of {cap_words(self.limit)}"

    def cut(self, what: str, size: int | None, granted: int) -> str:
        """Record (and return) why `what` was cut to `granted` bytes or left out."""
        reason = self.which()
        line = (f"{what}: not copied ({size} bytes; {reason} reached)" if granted <= 0
                else f"{what}: cut to {granted} of {size} bytes ({reason})")
        self.note(line)
        return line

    def note(self, line: str) -> None:
        """Record a cut made by another cap (a tool's threads or frames), said with the byte cuts."""
        with self._lock:
            if len(self.cuts) < 1000:
                self.cuts.append(line)


def cap_words(limit: int) -> str:
    """A cap in words: whole MiB as MiB, else bytes (a cap of 4,000 bytes is not 'a cap of 0 MiB')."""
    return f"{limit // MiB} MiB" if limit % MiB == 0 else f"{limit} bytes"


def unlimited(label: str = "collection") -> ByteBudget:
    """A budget that never cuts (a collector used outside `collect`, e.g. from tests)."""
    return ByteBudget(1 << 62, label)


def apparent_size(path) -> int | None:
    """st_size without following a last-component link (sparse files count whole); None if it cannot be read."""
    try:
        return os.lstat(path).st_size
    except (OSError, ValueError):
        return None


#: threads and frames per thread of one rank's stack-tool output kept (a real rank: tens of threads, under 200
#: frames); a rank with 1,000 threads of 300 frames once made a 78 MB pyspy.json
TOOL_THREADS, TOOL_FRAMES = 256, 200


def cap_threads(threads: list) -> tuple[list, str | None]:
    """py-spy's JSON threads with at most TOOL_THREADS threads of TOOL_FRAMES frames (the innermost, where a thread
    waits), and what was cut, in words (None when nothing was)."""
    if not isinstance(threads, list):
        return threads, None
    cut_frames = 0
    kept = []
    for t in threads[:TOOL_THREADS]:
        frames = t.get("frames") if isinstance(t, dict) else None
        if isinstance(frames, list) and len(frames) > TOOL_FRAMES:
            cut_frames += len(frames) - TOOL_FRAMES
            t = dict(t, frames=frames[:TOOL_FRAMES])
        kept.append(t)
    parts = []
    if len(threads) > TOOL_THREADS:
        parts.append(f"{len(threads) - TOOL_THREADS} of {len(threads)} threads left out (at most {TOOL_THREADS})")
    if cut_frames:
        parts.append(f"{cut_frames} outer frames left out (at most {TOOL_FRAMES} a thread)")
    return kept, "; ".join(parts) or None


#: stdout one stack-tool run may send before it is stopped (forensics.collect.tool.run_tool's cap): 256 threads
#: of 200 frames of py-spy's indented JSON take about 20 MB
TOOL_READ_BYTES = 32 * MiB


def tool_read_cap(budget: ByteBudget) -> int:
    """The bytes a stack tool's output may take for this rank: TOOL_READ_BYTES, or less when the rank's or the
    collection's cap is nearer (the text written is never longer than what was read)."""
    return min(TOOL_READ_BYTES, budget.left)


def tool_room(budget: ByteBudget, what: str) -> tuple[int, str | None]:
    """(tool_read_cap, None), or (0, why `what` is not run) when no byte is left: nothing the tool printed could
    be written, so the target is not paused for it; the line is also said in the manifest's note. Why one
    function: py-spy's and gdb's collectors each made this check and line alike."""
    room = tool_read_cap(budget)
    if room > 0:
        return room, None
    line = f"{what}: not run ({budget.which()} reached)"
    budget.note(line)
    return 0, line


def leading_items(text: str) -> list:
    """The whole items at the start of a JSON array that was cut short (a tool stopped at its byte cap): the
    threads py-spy printed before the cut are as good as a full dump's first threads. Linear in `text`."""
    decoder = json.JSONDecoder()
    start = text.find("[")
    items: list = []
    if start < 0:
        return items
    pos, end = start + 1, len(text)
    while pos < end:
        while pos < end and text[pos] in " \t\r\n,":
            pos += 1
        if pos >= end or text[pos] == "]":
            break
        try:
            item, pos = decoder.raw_decode(text, pos)
        except (ValueError, RecursionError):  # the item the cut fell in
            break
        items.append(item)
    return items


def fit_prefix(sizes: list[int], room: int, overhead: int = 2) -> int:
    """How many leading items of these encoded sizes fit in `room` bytes (each with `overhead` for its separator
    and the brackets): what a tool's output keeps when the byte cap leaves less than all of it."""
    used = overhead
    for count, size in enumerate(sizes):
        used += size + overhead
        if used > room:
            return count
    return len(sizes)


def write_within(budget: ByteBudget, path: str | os.PathLike, data: bytes, what: str,
                 lines: str | None = None) -> tuple[bool, str | None]:
    """Write `data` as a new file within the rank's and the collection's bytes left: whole, cut to its start, or
    not at all when no byte is left. (written, the cut in words or None); a cut is also said in the manifest's
    note. Why one function: a tool's error text and a RAS report were written whole outside the byte caps.
    `lines` ("first" or "last") cuts a text at a line boundary instead, keeping its first or its last lines and a
    cut line where the rest was (parsers.input.cutmark: its reader skips it), so a cut file stays readable."""
    granted = budget.reserve(len(data))
    kept = data[:granted] if lines is None or granted >= len(data) else cut_at_lines(data, granted, lines,
                                                                                       budget.which())
    cut = budget.cut(what, len(data), len(kept)) if len(kept) < len(data) else None
    budget.settle(granted, len(kept))
    if not kept and data:
        return False, cut
    try:
        safefs.write_new(path, kept)
    except OSError:
        budget.settle(len(kept), 0)
        raise
    return True, cut


def cut_at_lines(data: bytes, room: int, keep: str, why: str) -> bytes:
    """`data`'s first (keep="first") or last whole lines and a cut line, all within `room` bytes; b"" when not
    even the cut line fits. Linear in `room`: one slice and one search for a newline."""
    mark = cut_line(len(data), why)  # the longest it can be: fewer bytes left out print no more digits
    avail = room - len(mark)
    if avail <= 0:
        return b""
    if keep == "last":
        part = data[len(data) - avail:]
        if data[len(data) - avail - 1:len(data) - avail] != b"\n":  # it starts inside a line: drop that line
            newline = part.find(b"\n")
            part = part[newline + 1:] if newline >= 0 else b""
        return cut_line(len(data) - len(part), why) + part
    part = data[:avail]
    part = part[:part.rfind(b"\n") + 1]  # up to the last whole line (none: nothing)
    return part + cut_line(len(data) - len(part), why)


def write_whole(budget: ByteBudget, path: str | os.PathLike, data: bytes | str, what: str,
                replace: bool = False) -> str | None:
    """Write `data` as a new file whole within the bytes left, or not at all: for a file that a cut would leave
    unreadable (JSON, XML). Returns the cut in words (also in the manifest's note), None when written.
    Why one function: py-spy's and gdb's JSON, and the host's JSON files, each reserved, settled and skipped alike.
    `replace`: through a temp file renamed over `path` (safefs.replace_file: the host's digest, never seen half)."""
    raw = data.encode("utf-8", "replace") if isinstance(data, str) else data
    granted = budget.reserve(len(raw))
    if granted < len(raw):
        budget.settle(granted, 0)
        return budget.cut(what, len(raw), 0)
    try:
        (safefs.replace_file if replace else safefs.write_new)(path, raw)
    except OSError:
        budget.settle(granted, 0)
        raise
    return None


def fit_doc(budget: ByteBudget, doc: dict, key: str, what: str) -> tuple[str, str | None]:
    """`doc`'s compact JSON within the bytes left: where the whole would pass them, only the leading items of
    doc[key] that fit are kept (the first samples, the first threads), the rest left out and said in the manifest's
    note. (text, the cut in words or None); the text's bytes are charged (a caller that does not write it gives
    them back with settle(len(text), 0))."""
    text = json.dumps(doc, separators=(",", ":"))
    granted = budget.reserve(len(text))
    cut = None
    if granted < len(text) and isinstance(doc.get(key), list):
        items = doc[key]
        sizes = [len(json.dumps(item, separators=(",", ":"))) for item in items]
        keep = fit_prefix(sizes, max(0, granted - (len(text) - sum(sizes) - len(sizes))), overhead=1)
        doc[key] = items[:keep]
        cut = f"{what}: {len(items) - keep} of {len(items)} {key} left out ({budget.which()} reached)"
        budget.note(cut)
        text = json.dumps(doc, separators=(",", ":"))
    budget.settle(granted, len(text))
    return text, cut
