"""A process's own report of the fatal signal it received (Open MPI's and UCX's signal handlers).

Why: an MPI-launched NCCL job whose process crashes (a SIGSEGV in a library thread) prints
no NCCL WARN and no Python traceback; the runtime's signal handler prints instead, each
line prefixed with the crashing process's own host and pid. Format facts:

    Open MPI:  [host:pid] *** Process received signal ***
               [host:pid] Signal: Segmentation fault (11)
    UCX:       [host:pid:0:tid] Caught signal 11 (Segmentation fault: address not mapped ...)

(seen in NVIDIA/nccl#1669, NCCL 2.26.2 under Open MPI, and #1996, NCCL 2.27.7 under UCX).
The bracket names who died, so the event's origin is that process whatever wrapper the
line had; a launcher label (rank) in front of it is kept. An Open MPI report yields two
events of one process (the banner, then its signal): both have the same origin.
"""

from __future__ import annotations

import re

from parsers.model.events import CrashSignal, ErrorEvent, ErrorKind, Origin

KIND = ErrorKind.PROCESS_SIGNAL

_HOST = r"(?P<host>[A-Za-z0-9][\w.-]{0,252})"
_BANNER = re.compile(r"^\[" + _HOST + r":(?P<pid>\d{1,10})\] \*\*\* Process received signal \*\*\*")
_OMPI_SIGNAL = re.compile(r"^\[" + _HOST + r":(?P<pid>\d{1,10})\] Signal: (?P<name>[^()\n]{1,60}) \((?P<num>\d{1,3})\)")
_UCX = re.compile(r"^\[" + _HOST + r":(?P<pid>\d{1,10}):\d{1,10}:\d{1,10}\] Caught signal (?P<num>\d{1,3})"
                  r"(?: \((?P<name>[^:)\n]{1,60}))?")

#: words that only these handlers print: an unmatched line with them is reported, not dropped
KNOWN_WORDS = re.compile(r"\*\*\* Process received signal \*\*\*|\] Caught signal \d")


def match_line(text: str, origin: Origin) -> list:
    """The one event of a signal-handler line, or [] if the line is none."""
    if "signal" not in text and "Signal: " not in text:
        return []
    s = text.strip()
    m = _BANNER.match(s) or _OMPI_SIGNAL.match(s) or _UCX.match(s)
    if m is None:
        return []
    groups = m.groupdict()
    num, name = groups.get("num"), groups.get("name")
    data = CrashSignal("ucx" if m.re is _UCX else "open-mpi", int(num) if num is not None else None,
                       name.strip() if name else None)
    who = Origin(host=groups["host"], pid=int(groups["pid"]), rank=origin.rank, file=origin.file, line=origin.line)
    return [ErrorEvent(kind=KIND, message=s[:500], origin=who, source="crash-handler", data=data)]
