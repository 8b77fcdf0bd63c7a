"""Strip what launchers and log shippers glue in front of a line, keeping what it says.

Real logs arrive wrapped: Open MPI `[1,0]<stdout>:`, Slurm `--label` `11: `, Ray
`(RayTrainWorker pid=..., ip=...)` with ANSI colours, `host [stderr] `, timestamps,
console borders, PyTorch's `[rank3]:`. NCCL and c10d formats can only be matched once
these are gone, and what they say (host, rank, pid) is often the only place a line
names its origin, so it is kept in a LinePrefix instead of being thrown away.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

_ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")
_OMPI = re.compile(r"^(?:\w{3} \w{3} +\d+ \d\d:\d\d:\d\d \d{4})?\[(\d+),(\d+)\]<(?:stdout|stderr)>:")
_RAY = re.compile(r"^\((?P<who>[^()]*?)pid=(?P<pid>\d+)(?:, ip=(?P<ip>[0-9a-fA-F.:]+))?\)\s?")
_SHIPPER = re.compile(r"^(?P<host>[A-Za-z0-9][\w.-]*) \[(?:stdout|stderr)\]:? ")
_SLURM = re.compile(r"^\s*(\d{1,6}): ")
_TORCH_RANK = re.compile(r"^\[rank(\d+)\]:")
_ISO_TS = re.compile(
    r"^\[?\d{4}-\d\d-\d\d[ T]\d\d:\d\d:\d\d(?:[.,]\d+)?(?:Z|[+-]\d\d:?\d\d)?\]?(?: [-|] | - \w+ - |\s+)"
)
_BORDER = re.compile(r"^[│|┃]\s+")


@dataclass
class LinePrefix:
    """What the wrappers of one line said about where it came from."""

    host: str | None = None
    rank: int | None = None  #: global rank (launcher rank or PyTorch's [rankN])
    pid: int | None = None
    timestamp: str | None = None


def strip_prefix(line: str) -> tuple[str, LinePrefix]:
    """Remove every known wrapper from the front of `line`; return the payload and what they said.

    Wrappers nest (Ray around a timestamp around `[rank0]:`), so strip until none matches.
    """
    info = LinePrefix()
    if "\x1b" in line:
        line = _ANSI.sub("", line)
    text = line.rstrip("\r\n")
    for _ in range(8):
        stripped = text.lstrip()
        m = _OMPI.match(stripped)
        if m:
            info.rank = int(m.group(2))
            text = stripped[m.end():]
            continue
        m = _RAY.match(stripped)
        if m:
            info.pid = int(m.group("pid"))
            if m.group("ip"):
                info.host = m.group("ip")
            text = stripped[m.end():]
            continue
        m = _TORCH_RANK.match(stripped)
        if m:
            info.rank = int(m.group(1))
            text = stripped[m.end():]
            continue
        m = _ISO_TS.match(stripped)
        if m and not _is_nccl_ts(stripped):
            info.timestamp = m.group(0).strip(" []-|")
            text = stripped[m.end():]
            continue
        m = _SHIPPER.match(stripped)
        if m:
            info.host = m.group("host").split(".")[0]
            text = stripped[m.end():]
            continue
        m = _SLURM.match(stripped)
        if m:
            if info.rank is None:
                info.rank = int(m.group(1))
            text = stripped[m.end():]
            continue
        m = _BORDER.match(stripped)
        if m:
            text = stripped[m.end():]
            continue
        return stripped, info
    return text.lstrip(), info


def _is_nccl_ts(text: str) -> bool:
    """NCCL 2.26+ puts `[%F %T] ` before its own prefix: leave it for the NCCL reader."""
    return text.startswith("[") and " NCCL " in text[:200]
