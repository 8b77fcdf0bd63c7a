"""What PyTorch's own desync report (TORCH_NCCL_DESYNC_DEBUG=1) supports, and no more.

When a collective times out with desync debug on, the timing-out rank reads every rank's last
collective from the store and prints which ranks lag (TraceUtils.h): ranks that never joined any
collective, ranks that joined the lowest collective but did not finish it, or ranks that finished
it but never joined the next one; then a snapshot of every rank's last state ('[0, 1, 2] started
ALLREDUCE'). The reader (parsers.readers.c10d) turns those lines into `desync-lagging` and
`desync-state` events.

The report names the ranks furthest behind: the others wait for them. That is the same claim as
the Flight Recorder analyzer's missing ranks, so the same rule decides: the lagging ranks are named
(BEHIND) only when they are a strict minority of the ranks the report saw (its snapshot, the lagging
ranks themselves, or the stated world, the largest). Where most ranks lag, the few ahead may be the
odd ones, and nobody is named (pytorch/pytorch#152623: rank 7 finished #182 and never joined #183
while ranks 0-6 went two hundred collectives on; rank 7 is named).
"""

from __future__ import annotations

from typing import Iterable, cast

from parsers.model.events import DesyncReport, ErrorEvent, ErrorKind
from parsers.model.findings import ReasonClass, of_rank
from parsers.model.majority import strict_minority
from parsers.model.ranges import fold

LAGGING = ErrorKind.DESYNC_LAGGING
STATE = ErrorKind.DESYNC_STATE
_SAID = {"never-joined": "never joined any collective",
         "inside": "joined collective #{n} but did not finish it",
         "finished-before": "finished collective #{n} but never joined #{m}"}


def _reporter(e: ErrorEvent) -> tuple:
    """Which report a line belongs to: the file, the rank that printed it, and its group."""
    o = e.origin
    return (o.file if o else None, o.rank if o else None, e.comm)


def offer_suspects(errors: Iterable[tuple[int | None, ErrorEvent]], world: int | None, get) -> None:
    """Lagging ranks of each desync report, named when they are a strict minority of the ranks it saw."""
    lagging: list[ErrorEvent] = []
    seen: dict[tuple, set[int]] = {}
    for _, e in errors:
        if type(e) is not ErrorEvent:
            continue
        if e.kind == LAGGING:
            lagging.append(e)
        elif e.kind == STATE:
            seen.setdefault(_reporter(e), set()).update(cast(DesyncReport, e.data).ranks or ())
    for e in lagging:
        report = cast(DesyncReport, e.data)
        ranks = sorted(set(report.lagging or ()))
        others = seen.get(_reporter(e), set())
        size = max(len(others | set(ranks)), world or 0)
        if not strict_minority(len(ranks), size):
            continue
        n = report.collective
        said = _SAID.get(report.state or "", "lags").format(n=n, m=(n or 0) + 1)
        reporter = e.origin.rank if e.origin else None
        by = f"rank {reporter}'s" if reporter is not None else "a"
        cite = f"desync report: {e.message}" + (f" [{e.origin.file}:{e.origin.line}]" if e.origin and e.origin.file
                                               else "")
        for r in ranks:
            get(r).offer(ReasonClass.BEHIND, of_rank(r, f"{said}, by {by} TORCH_NCCL_DESYNC_DEBUG report; the other "
                         f"{size - len(ranks)} of {size} ranks it saw went on (lagging: {fold(ranks)})"),
                         ReasonClass.BEHIND.default_confidence, [cite])
