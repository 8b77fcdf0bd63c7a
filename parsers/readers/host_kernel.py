"""Decodes kernel-log text (dmesg -T, dmesg, journalctl -k in its short, iso, monotonic and verbose forms, syslog,
/dev/kmsg, clush/pdsh and `srun --label` output of any of these).

Kernel lines reach us with many prefixes: wall-clock or monotonic stamps, a
thread tag, syslog's 'Mon DD HH:MM:SS host kernel:', ISO stamps, kmsg's
'pri,seq,usec,flags;', a parallel shell's 'node044: '. The reader splits each line into stamp, host and
message so the knowledge base sees the message, the report can show when it happened, and a fault is
pinned to the host the line names (a syslog file of many hosts is many hosts' evidence).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Iterable

from parsers.input.cutmark import is_cut_line
from parsers.model.kernel_time import KernelStamp, parse_stamp

#: a host word as syslog, journalctl and clush/pdsh print it (never the '<hostname-redacted>' of a redacted paste)
_HOST = r"[A-Za-z0-9][\w.-]{0,252}"
#: what a kernel line starts with once a launcher's or a parallel shell's label is gone: a dmesg stamp, a syslog or
#: journalctl stamp, the 'kernel:' tag, or a driver's own word; a label is taken only before one of these
_KERNEL_HEAD = (r"(?=\[\s*\d+\.\d+\]|\[(?:Mon|Tue|Wed|Thu|Fri|Sat|Sun) |<\d+>|\S{3,4} [ \d]?\d "
                r"\d\d:\d\d:\d\d|\d{4}-\d\d-\d\dT\d|(?:\w{3} )?\d{4}-\d\d-\d\d \d|kernel: |"
                r"NVRM|nvidia|pcieport|mlx5_core )")
#: clush/pdsh's `node044: ` before a kernel line (`clush -w node[1-4] dmesg -T`): the host that printed it; never
#: a word in capitals (a driver's 'NVRM: ', 'ACPI: ' starts a message), never journalctl's bare 'kernel: '
_PARALLEL_SHELL = re.compile(rf"^(?![A-Z0-9_]+:|kernel:)(?P<host>{_HOST}): {_KERNEL_HEAD}")
#: Slurm `srun --label`'s `3: ` (a task number, not a host) before a kernel line
_TASK_LABEL = re.compile(rf"^\s*\d{{1,6}}: {_KERNEL_HEAD}")
#: the host and 'kernel:' (journalctl prints 'kernel[PID]:' for a record sent through the journal) after a stamp
#: (any word is peeled; only a host-shaped one is kept: a paste's '<hostname-redacted>' names none)
_HOST_TAG = r"(?P<host>\S{1,253}) kernel(?:\[\d+\])?: "
_HOST_WORD = re.compile(_HOST)

_PREFIXES = (
    _PARALLEL_SHELL,
    _TASK_LABEL,
    re.compile(r"^(?P<stamp>\d+,\d+,\d+,[^;]*);"),  # /dev/kmsg record header
    re.compile(r"^<\d+>"),  # syslog priority
    # dmesg -T
    re.compile(r"^\[(?P<stamp>(?:Mon|Tue|Wed|Thu|Fri|Sat|Sun) [A-Z][a-z]{2} [ \d]\d \d\d:\d\d:\d\d \d{4})\] ?"),
    # journalctl -o short-iso / short-iso-precise, dmesg --time-format iso, rsyslog's RFC 3339 stamps
    re.compile(rf"^(?P<stamp>\d{{4}}-\d\d-\d\dT[\d:.,]+(?:[+-]\d\d:?\d\d|Z)?) (?:{_HOST_TAG})?"),
    # syslog, journalctl short(-precise)
    re.compile(rf"^(?P<stamp>\S{{3,4}} [ \d]?\d \d\d:\d\d:\d\d(?:\.\d+)?) {_HOST_TAG}"),
    re.compile(r"^kernel: "),
    re.compile(r"^\[(?P<stamp>\s*\d+\.\d+)\] ?"),  # monotonic seconds
    re.compile(rf"^{_HOST_TAG}"),  # journalctl -o short-monotonic: '[  354.872067] vm kernel: '
    re.compile(r"^\[\s*[TC]\d+\] ?"),  # printk caller tag
)


@dataclass(frozen=True)
class KernelLine:
    """One kernel-log line: its number in the file, its stamp (as printed), its message, and the host the line
    itself names (syslog's and journalctl's host field, a parallel shell's label; None where it names none)."""

    line_no: int
    stamp: str | None
    message: str
    raw: str
    host: str | None = None

    @property
    def when(self) -> KernelStamp | None:
        """The stamp decoded (wall clock, since boot, or zoned; parsers.model.kernel_time), None if it has none."""
        return parse_stamp(self.stamp)


def split_line(line: str) -> tuple[str | None, str | None, str]:
    """(stamp, host, message) of one line; prefixes are peeled in order, each at most once."""
    stamp: str | None = None
    host: str | None = None
    rest = line.rstrip("\n")
    for prefix in _PREFIXES:
        m = prefix.match(rest)
        if not m:
            continue
        found = m.groupdict()
        if found.get("stamp") and stamp is None:
            stamp = found["stamp"].strip()
        if found.get("host") and host is None and _HOST_WORD.fullmatch(found["host"]):
            host = found["host"]
        rest = rest[m.end() :]
    return stamp, host, rest.strip()


def split_prefix(line: str) -> tuple[str | None, str]:
    """(stamp, message) of one line (split_line without the host)."""
    stamp, _host, message = split_line(line)
    return stamp, message


def read_kernel_log(text: str) -> list[KernelLine]:
    """Every non-empty line of a kernel log, decoded; never raises on odd lines. A `journalctl -o verbose`
    export is read record by record (verbose_records)."""
    if is_verbose_journal(text[:65536]):
        return verbose_records(text)
    out = []
    for number, raw in enumerate(text.splitlines(), start=1):
        if not raw.strip() or is_cut_line(raw):  # where a byte cap cut the file: no kernel message
            continue
        stamp, host, message = split_line(raw)
        out.append(KernelLine(number, stamp, message, raw, host))
    return out


#: `journalctl -o verbose`: a record's head ('Sun 2026-12-06 21:04:35.944324 UTC [s=...;i=3;...]'), then its fields
#: indented, one `KEY=value` a line
_VERBOSE_HEAD = re.compile(r"^(?:\w{3} )?(?P<stamp>\d{4}-\d\d-\d\d \d\d:\d\d:\d\d(?:\.\d+)?(?: \w+)?) \[s=")
_VERBOSE_FIELD = re.compile(r"^\s+(?P<key>[A-Z0-9_]{1,64})=(?P<value>.*)$")


def is_verbose_journal(head: str) -> bool:
    """True for `journalctl -o verbose` text: a record head and MESSAGE= fields under it."""
    return "\n    MESSAGE=" in head and any(_VERBOSE_HEAD.match(ln) for ln in head.splitlines()[:400])


def verbose_records(text: str) -> list[KernelLine]:
    """One KernelLine per record's MESSAGE=, at that field's line, stamped with the record's head and hosted by
    its _HOSTNAME= (which journalctl may print before or after the message)."""
    out: list[KernelLine] = []
    stamp: str | None = None
    record: list[tuple[int, str]] = []  # (line, message) of the record being read
    host: str | None = None

    def close() -> None:
        out.extend(KernelLine(n, stamp, msg.strip(), msg, host) for n, msg in record)

    for number, raw in enumerate(text.splitlines(), start=1):
        head = _VERBOSE_HEAD.match(raw)
        if head:
            close()
            stamp, record, host = head.group("stamp"), [], None
            continue
        field_ = _VERBOSE_FIELD.match(raw)
        if field_ is None:
            continue
        if field_.group("key") == "MESSAGE":
            record.append((number, field_.group("value")))
        elif field_.group("key") == "_HOSTNAME" and re.fullmatch(_HOST, field_.group("value")):
            host = field_.group("value")
    close()
    return out


def numbered_messages(lines: Iterable[KernelLine]) -> list[tuple[int, str]]:
    """(line number, message) pairs, the form the knowledge base scans."""
    return [(ln.line_no, ln.message) for ln in lines]
