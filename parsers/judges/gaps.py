"""What a logs folder lacks to reach the live answer (issue 39 item 7): the evidence gaps of a post-mortem.

Why: a live `collect` reads the recorder's state from /dev/shm and watches time pass; a logs folder holds
only what the job wrote. Where that is too little to tell a culprit from its peers, the verdict must say
which piece is missing and how to have it next time, never leave the reader to guess why a post-mortem
names no one (or a different rank than the live look did). Each gap is typed here; its words are
presentation's (forensics/report/words).

- no recorder state: an NCCL job's logs folder (no bundle manifest: not a live collection) with no
  recorder state file: the recorder, loaded, copies its state beside the NCCL logs when the job dies.
- Flight Recorder without timing: NCCL ops in the dumps completed with no start time (timing off), so an
  op still 'scheduled' may be running on the GPU or waiting behind other work: a long kernel on one
  rank's stream cannot be told from its peers' waits.
- no Python stacks: some ranks' output holds faulthandler's dump of every thread (PYTHONFAULTHANDLER, printed
  when a rank aborts) and others' none: what those ranks' threads did is unknown here, and the one that did not
  abort is often the one the others waited on (seen, H100: a rank blocked on a lock its own thread held was
  killed without a dump; live, py-spy showed the holder).
"""

from __future__ import annotations

from parsers.gather.evidence import Evidence
from parsers.model.events import ErrorEvent, ErrorKind
from parsers.model.findings import EvidenceGap


def evidence_gaps(ev: Evidence) -> list[EvidenceGap]:
    """The gaps of `ev` (parsers.gather.evidence.Evidence), in the order a reader should fill them."""
    dumps = ev.of_kind("fr-dump")
    timing = [(a.rank, a.parsed.facts.get("fr_timing")) for a in dumps if a.parsed is not None]
    nccl = bool(ev.of_kind("nccl-log")) or any(t is not None for _, t in timing) or bool(ev.recorder)
    gaps: list[EvidenceGap] = []
    if nccl and ev.manifest is None and not ev.recorder:
        gaps.append(EvidenceGap("no-recorder-state"))
    untimed = [r for r, t in timing if t == "off"]
    if untimed and not any(t == "on" for _, t in timing):
        gaps.append(EvidenceGap("fr-without-timing", tuple(sorted({r for r in untimed if r is not None})),
                                count=len(untimed)))
    if ev.manifest is None and (stackless := _without_stacks(ev)):
        gaps.append(EvidenceGap("no-stacks", stackless, count=len(stackless)))
    return gaps


def _without_stacks(ev: Evidence) -> tuple[int, ...]:
    """Ranks whose output holds no faulthandler dump where another rank's does (so the env printed them), less
    those that finished (torch's teardown warning, or exit code 0): their threads had nothing left to show."""
    dumped: set[int] = set()
    ranks: set[int] = set()
    finished = {x.rank for x in ev.exits if x.rank is not None and x.returncode == 0}
    for a in ev.of_kind("rank-log"):
        if a.rank is None or a.parsed is None:
            continue
        ranks.add(a.rank)
        kinds = {e.kind for e in a.parsed.events if type(e) is ErrorEvent}
        if ErrorKind.PYTHON_FATAL in kinds:
            dumped.add(a.rank)
        if ErrorKind.C10D_TEARDOWN in kinds:
            finished.add(a.rank)
    return tuple(sorted(ranks - dumped - finished)) if dumped else ()
