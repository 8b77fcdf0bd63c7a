"""A collective enqueued but never started on one rank's GPU, from Flight Recorder dumps with timing (issue 39).

Why: with TORCH_NCCL_ENABLE_TIMING=1 every collective gets a CUDA start event, and a dump's `pg_status`
says how far each group got: `last_enqueued_collective`, `last_started_collective` (its start event has
run on the GPU) and `last_completed_collective`. When a rank's newest collective of a group was enqueued
but never started, while nothing of its own in that group is still running, and a peer has started that
same collective and waits in it, the rank's GPU stream is busy with other work queued ahead of it (a long
kernel, a GPU-side loop): what the recorder says live as "never started on its GPU", now in a logs folder.
Dumps without timing never say 'started' (parsers/judges/gaps.py says that gap): they are not read here.
"""

from __future__ import annotations

from typing import NamedTuple

from parsers.gather.evidence import Artifact, Evidence
from parsers.model.events import OpEvent, Progress
from parsers.judges.logs.names import position
from parsers.model.findings import Findings, JudgeContext, ReasonClass, Suspect, cite
from parsers.model.ranges import fold

#: below the recorder's 0.85 for the same claim: the dump's counters are per group, not per GPU channel
CONFIDENCE = 0.8


class _Counters(NamedTuple):
    """A group's Flight Recorder counters at one rank, each one stated."""

    enqueued: int
    started: int
    completed: int


def _timed_progress(ev: Evidence) -> dict[str, dict[int, tuple[_Counters, Artifact, str | None]]]:
    """comm -> global rank -> (its Flight Recorder counters, the dump, the state its entry of its newest enqueued
    collective gives), from dumps with timing on."""
    out: dict[str, dict[int, tuple[_Counters, Artifact, str | None]]] = {}
    for art in ev.of_kind("fr-dump"):
        if art.parsed is None or art.parsed.facts.get("fr_timing") != "on":
            continue
        states = {(e.comm, e.seq): e.state for e in art.parsed.events if type(e) is OpEvent and e.seq_kind == "seq"}
        for e in art.parsed.events:
            if type(e) is not Progress or e.origin.rank is None:
                continue
            enqueued, started, completed = e.last_enqueued, e.last_started, e.last_completed
            if enqueued is not None and started is not None and completed is not None:
                out.setdefault(e.comm, {})[e.origin.rank] = (_Counters(enqueued, started, completed), art,
                                                             states.get((e.comm, enqueued)))
    return out


def _queued(ranks: dict[int, tuple[_Counters, Artifact, str | None]]
            ) -> list[tuple[int, _Counters, Artifact, list[int]]]:
    """(rank, counters, dump, peers that started the same collective and wait in it) of each queued rank.

    Both the group's counters and the collective's own entry must say 'not started': on NCCL 2.28.9 a rank
    whose collective failed (a truncated message) kept last_started one behind while its entry said
    'started' (tests/fixtures/issue39): that rank ran the collective and failed in it."""
    found = []
    for rank, (p, where, state) in ranks.items():
        if not (p.enqueued > p.started == p.completed) or state != "enqueued":
            continue  # not waiting, its own earlier collective still runs, or its entry says it started
        running = sorted(r for r, (q, _, _) in ranks.items()
                         if r != rank and q.started >= p.enqueued > q.completed)
        if running:
            found.append((rank, p, where, running))
    return found


def judge(ev: Evidence, ctx: JudgeContext | None = None) -> Findings:
    """GPU-queued suspects from timed Flight Recorder dumps (source: the dumps)."""
    suspects = []
    for comm, ranks in _timed_progress(ev).items():
        queued = _queued(ranks)
        if len(queued) * 2 > len(ranks):
            continue  # most of the group never started it: no odd one out (they may all wait on one absent rank)
        for rank, p, dump, running in queued:
            suspects.append(Suspect(
                rank=rank, host=dump.host, pid=dump.pid, reason_class=ReasonClass.GPU_QUEUED, confidence=CONFIDENCE,
                reason=(f"enqueued {position(comm, p.enqueued)} but it never started on its GPU (Flight Recorder "
                        f"with timing: its entry 'scheduled', last started #{p.started}), while ranks "
                        f"{fold(running)} started it and wait in it: work queued ahead of it keeps the GPU stream "
                        "busy"),
                evidence=[cite(f"last enqueued #{p.enqueued}, started #{p.started}, completed "
                               f"#{p.completed}", tool="Flight Recorder", file=dump.cite)]))
    return Findings(source="dumps", suspects=suspects, judge="fr_started")
