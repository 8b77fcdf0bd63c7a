"""One prefix-stripped text line -> events, for every line format except NCCL's own records.

Why a module of its own: rank logs and NCCL logs are both mixed files in the wild
(PyTorch watchdog lines inside an NCCL_DEBUG file, NCCL records inside stdout), so
both readers need the same per-line dispatch without importing each other.
`looks_known` says whether an unmatched line still looks like one of these formats:
such lines are reported (Parsed.unread), never dropped in silence.
"""

from __future__ import annotations

import functools
import re
from typing import Callable

from parsers.model.events import Origin
from parsers.readers import c10d, crash_signal, ddp, fr_report, gloo, launcher, nccl_tests, pasted_host, unique_id

#: words that only NCCL, PyTorch distributed, torchelastic, CUDA or the GPU driver print. NCCL's result codes are
#: short ('UnhandledCuda' the longest middle): `\w{0,64}`, as an open `\w*` scanned to the end of a long run of
#: 'nccl' from each copy (quadratic, issue 31)
_KNOWN = re.compile(
    r"NCCL (?:INFO|WARN|TRACE)|ProcessGroup(?:NCCL|Gloo)|Watchdog caught|NCCL work|opCount|c10d::|\[c10d"
    r"|torch\.distributed|Dist(?:Backend|Store|Network)Error|ChildFailedError|exitcode|local_rank"
    r"|NVRM|Xid|nccl\w{0,64}Error|Cuda failure|CUDA error|[Hh]eartbeat monitor|gloo::|NCCL error|NET/OFI"
    r"|CollectiveFingerPrint|mismatch between collectives"
)
#: lines of those formats that carry nothing to read: stack frames, traceback lines, banners
_BENIGN = re.compile(
    r"^(?:frame #\d+|Exception raised from|Traceback \(most recent call last\)|File \"|\^+|~+|raise |return |"
    r"work = |sys\.exit|\$ |C\+\+ CapturedTraceback|#\d+ |\S+\.so(?:\.\d+)*\(\+0x|/\S+\.so|Warning:|warnings\.warn"
    #: a rich traceback's box rows (accelerate, typer): an empty row, a source row behind its line-number gutter
    r"|[│┃]?\s*$|(?:❱\s*)?\d{1,6} [│┃])"
)


NOTHING_LINES = 8192  #: lines remembered by each memo below
NOTHING_LINE_CHARS = 1024  #: longer lines are not kept


def remembered_for_short_lines(test: Callable[[str], bool]) -> Callable[[str], bool]:
    """`test` (a pure function of one line) with its answers for lines up to NOTHING_LINE_CHARS kept, up to
    NOTHING_LINES of them (cleared when full): a repeated line is judged once."""
    seen: dict[str, bool] = {}

    @functools.wraps(test)
    def remembered(text: str) -> bool:
        hit = seen.get(text)
        if hit is not None:
            return hit
        answer = test(text)
        if len(text) <= NOTHING_LINE_CHARS:
            if len(seen) >= NOTHING_LINES:
                seen.clear()
            seen[text] = answer
        return answer
    return remembered


#: (line, who printed it) pairs that gave no event: logs repeat lines (progress bars, warnings, a fuzzer's
#: repetitions), and whether a line gives events depends on its text and its origin's identity only (never on
#: its line number); bounded, cleared when full
_NOTHING: set[tuple] = set()


def match_text(text: str, origin: Origin) -> list:
    """Events of one non-NCCL line: c10d, gloo, launcher, host/CUDA evidence, a runtime's fatal-signal
    report, DDP's reducer error (first reader that knows it)."""
    key = (text, origin.host, origin.pid, origin.rank, origin.local_rank, origin.device, origin.file)
    if key in _NOTHING:
        return []
    found = (nccl_tests.match_line(text, origin) or c10d.match_line(text, origin) or gloo.match_line(text, origin)
             or launcher.match_line(text, origin) or pasted_host.match_line(text, origin)
             or crash_signal.match_line(text, origin) or ddp.match_line(text, origin)
             or unique_id.match_line(text, origin))
    if not found and len(text) <= NOTHING_LINE_CHARS:
        if len(_NOTHING) >= NOTHING_LINES:
            _NOTHING.clear()
        _NOTHING.add(key)
    return found


#: how much of an unmatched line `looks_known` searches: every format it knows names itself in a line's
#: first few hundred characters, and a 70 KB line searched whole cost ~4 ms (a 33 MB log of such lines, 5 s)
KNOWN_HEAD_CHARS = 4096


@remembered_for_short_lines
def looks_known(text: str) -> bool:
    """True when an unmatched line still looks like a format this project reads (and is no stack frame)."""
    head = text[:KNOWN_HEAD_CHARS]
    return bool(_KNOWN.search(head) or fr_report.KNOWN_WORDS.search(head) or crash_signal.KNOWN_WORDS.search(head)) \
        and not _BENIGN.match(head.lstrip())


@remembered_for_short_lines
def is_benign(text: str) -> bool:
    """Stack frames and traceback lines, and the advice lines of DDP's reducer error: expected in these logs,
    nothing to read in them."""
    return bool(_BENIGN.match(text.lstrip())) or ddp.is_advice(text)


#: a run of this many digits is no field of any record; int() refuses decimal strings over 4,300 digits,
#: so one such run would fail the whole file's read (a hostile or garbled line)
ABSURD_DIGITS = 4000
_ABSURD = re.compile(r"\d{%d}" % ABSURD_DIGITS)


def is_absurd(raw: str) -> bool:
    """A line holding a number of thousands of digits: skipped (counted unknown), never parsed.
    The length test first: no line shorter than the run can hold it, and almost every line is."""
    return len(raw) > ABSURD_DIGITS and _ABSURD.search(raw) is not None


#: a record longer than this is matched on its first MATCH_CHARS only. Why: a log line is handed to a dozen
#: readers' patterns in turn (c10d, gloo, launchers, crash signals, host lines...), each a linear search, so
#: a 32 MB log of 160 KB lines took seconds; every marker those patterns look for sits in a record's first
#: few hundred characters (no line of any text fixture, our captures and the public excerpts, reaches 4 KB)
MATCH_CHARS = 16 * 1024


def matched_part(raw: str) -> str:
    """The part of a record the readers' patterns see (all of it, but for hostile lengths)."""
    return raw if len(raw) <= MATCH_CHARS else raw[:MATCH_CHARS]


#: lines not understood kept as a sample per file, so a verdict can show the first few (the count is always whole)
UNKNOWN_SAMPLE = 5


#: a line that may be key material: a key block's armour, or a run of base64 with nothing else on the line
_KEY_LINE = re.compile(r"-----(?:BEGIN|END) [A-Z0-9 ]{0,40}(?:PRIVATE|SECRET|ENCRYPTED)|^[A-Za-z0-9+/=]{24,}$|"
                       r"^(?:Private-Lines|Private-MAC|PuTTY-User-Key-File)|^AGE-SECRET-KEY-")
KEY_LINE_SAMPLE = "<a line of a key block or of base64: not quoted>"


def note_unknown(out, lineno: int, text: str) -> None:
    """Count a line no reader understood (Parsed.unknown_lines) and keep the first few (facts['unknown_sample']).
    A line that may be a private key's (its armour, a base64 run alone on its line) is never quoted: the
    sample reaches analyze's text and JSON, and a loose folder may hold an id_rsa (issue 40)."""
    out.unknown_lines += 1
    sample = out.facts.setdefault("unknown_sample", [])
    if len(sample) < UNKNOWN_SAMPLE:
        line = text.strip()[:200]
        sample.append((lineno, KEY_LINE_SAMPLE if _KEY_LINE.search(line) else line))


def unnote_unknown(out, lineno: int) -> None:
    """Undo note_unknown for a line a later one completed (a wrapped record re-joined)."""
    out.unknown_lines -= 1
    sample = out.facts.get("unknown_sample")
    if sample:
        out.facts["unknown_sample"] = [s for s in sample if s[0] != lineno]
