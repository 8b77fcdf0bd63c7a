"""A collective timeout configured too short for any healthy collective: the cause is the setting, no rank.

Why: the watchdog's line states the timeout it applied (`WorkNCCL(..., Timeout(ms)=1) ran for 90
milliseconds`). A group's first collective also creates its NCCL communicator, which takes from
tens of milliseconds to seconds even when every rank is healthy, so a timeout under a second fires
on a job that is not hung at all (seen: instructlab/training#520 set 1 ms on purpose and the first
all-reduce timed out after 90 ms). Then no rank is behind anything, and the one thing to say is the
setting and where it is changed. Longer timeouts (PyTorch's default is 10 minutes for NCCL) say
nothing here: whether one is too short for a given job is not in the lines.
"""

from __future__ import annotations

from parsers.gather.evidence import Evidence
from typing import cast

from parsers.model.events import CollectiveTimeout, ErrorEvent, ErrorKind
from parsers.model.findings import SettingFact

#: below this no collective can be relied on to finish, the first one of a group setting up its communicator
SHORT_MS = 1000


def too_short(ev: Evidence) -> SettingFact | None:
    """The timeouts applied and who applied them, when every watchdog timeout that states its timeout states
    one under SHORT_MS (forensics/report/words/facts.py says that the cause is the setting); else None."""
    stated: list[tuple[int, int | None]] = []  #: (timeout, rank) of each watchdog timeout that states one
    for art in ev.artifacts:
        for e in art.parsed.events if art.parsed else ():
            ms = cast(CollectiveTimeout, e.data).timeout_ms if type(e) is ErrorEvent \
                and e.kind == ErrorKind.WATCHDOG_TIMEOUT else None
            if ms is not None:
                stated.append((ms, e.origin.rank))
    if not stated or any(ms >= SHORT_MS for ms, _ in stated):
        return None
    return SettingFact(tuple(sorted({ms for ms, _ in stated})), tuple(sorted({r for _, r in stated if r is not None})))
