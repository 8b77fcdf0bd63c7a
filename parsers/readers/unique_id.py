"""ProcessGroupNCCL's wait for the communicator's unique id, as a rank reports it.

Why a reader of its own: `[3] is setting up NCCL communicator and retrieving ncclUniqueId from [0] via c10d
key-value store by key '0', but store->get('0') got error: Socket Timeout` is raised by rank 3 about rank 0 (the
rank that publishes the id), as a DistBackendError in torch 2.x and as a plain RuntimeError before (spelt
'retreiving' in torch 1.x), also inside pytest's `E   ` report. It is a wait on another rank, never the fault
of the rank that prints it; the rank it waited for is in its own words.
"""

from __future__ import annotations

import re

from parsers.model.events import ErrorEvent, ErrorKind, Origin, StoreWait

_WAIT = re.compile(
    r"\[(?P<me>\d{1,7})\] is setting up NCCL communicator and retr(?:ie|ei)ving ncclUniqueId "
    r"from \[(?P<from>\d{1,7})\] via c10d key-value store by key '(?P<key>[^']{0,128})', "
    r"but store->get\('[^']{0,128}'\) got error: (?P<why>.{0,200})"
)


def match_line(text: str, origin: Origin) -> list:
    """The wait of rank `me` for rank `from`'s unique id, as a store timeout of rank `me`; [] if none."""
    if "ncclUniqueId" not in text:
        return []
    m = _WAIT.search(text)
    if not m:
        return []
    me = int(m.group("me"))
    return [ErrorEvent(kind=ErrorKind.STORE_TIMEOUT, message=text.strip()[:500], source="c10d",
                       origin=Origin(origin.host, origin.pid, me if origin.rank is None else origin.rank, origin.file,
                                     origin.line, local_rank=origin.local_rank),
                       data=StoreWait(waits_for=int(m.group("from")), key=m.group("key"), why=m.group("why").strip()))]
