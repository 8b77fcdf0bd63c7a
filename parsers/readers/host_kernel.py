"""Decodes kernel-log text (dmesg -T, dmesg, journalctl -k, syslog, /dev/kmsg).

Kernel lines reach us with many prefixes: wall-clock or monotonic stamps, a
thread tag, syslog's 'Mon DD HH:MM:SS host kernel:', ISO stamps, kmsg's
'pri,seq,usec,flags;'. The reader splits each line into stamp and message so the
knowledge base sees the message and the report can show when it happened.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Iterable

_PREFIXES = (
    re.compile(r"^(?P<stamp>\d+,\d+,\d+,[^;]*);"),  # /dev/kmsg record header
    re.compile(r"^<\d+>"),  # syslog priority
    re.compile(r"^\[(?P<stamp>(?:Mon|Tue|Wed|Thu|Fri|Sat|Sun) [A-Z][a-z]{2} [ \d]\d \d\d:\d\d:\d\d \d{4})\] ?"),  # dmesg -T
    re.compile(r"^(?P<stamp>\d{4}-\d\d-\d\dT[\d:.,]+(?:[+-]\d\d:?\d\d|Z)?) (?:\S+ kernel: )?"),  # journalctl -o short-iso, dmesg --time-format iso
    re.compile(r"^(?P<stamp>\S{3,4} [ \d]?\d \d\d:\d\d:\d\d) \S+ kernel: "),  # syslog (any month language)
    re.compile(r"^kernel: "),
    re.compile(r"^\[(?P<stamp>\s*\d+\.\d+)\] ?"),  # monotonic seconds
    re.compile(r"^\[\s*[TC]\d+\] ?"),  # printk caller tag
)


@dataclass(frozen=True)
class KernelLine:
    """One kernel-log line: its number in the file, its stamp (as printed) and its message."""

    line_no: int
    stamp: str | None
    message: str
    raw: str


def split_prefix(line: str) -> tuple[str | None, str]:
    """(stamp, message) of one line; prefixes are peeled in order, each at most once."""
    stamp: str | None = None
    rest = line.rstrip("\n")
    for prefix in _PREFIXES:
        m = prefix.match(rest)
        if not m:
            continue
        found = m.groupdict().get("stamp")
        if found and stamp is None:
            stamp = found.strip()
        rest = rest[m.end() :]
    return stamp, rest.strip()


def read_kernel_log(text: str) -> list[KernelLine]:
    """Every non-empty line of a kernel log, decoded; never raises on odd lines."""
    out = []
    for number, raw in enumerate(text.splitlines(), start=1):
        if not raw.strip():
            continue
        stamp, message = split_prefix(raw)
        out.append(KernelLine(number, stamp, message, raw))
    return out


def numbered_messages(lines: Iterable[KernelLine]) -> list[tuple[int, str]]:
    """(line number, message) pairs, the form the knowledge base scans."""
    return [(ln.line_no, ln.message) for ln in lines]
