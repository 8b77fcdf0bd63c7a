"""Hang or progress, decided first and from time: is the job still completing collectives?

Why first: a snapshot taken in the middle of a healthy collective looks exactly like a
hang (some ranks wait, one has not arrived yet). Only time tells them apart. The NCCL
recorder stamps every operation when it is entered, makes progress and completes, so
the age of the newest completion or progress step on each rank, measured against the
moment the state file was copied, says whether the job moves. A rank whose newest
progress is older than HANG_AFTER_S has stopped; a job all of whose recorded ranks
progressed more recently than that is running, whatever one snapshot shows.
"""

from __future__ import annotations

import datetime as dt
import time
from dataclasses import dataclass, field
from typing import Any

from parsers.gather.evidence import Evidence
from parsers.judges.observations import timed_out
from parsers.model.findings import Findings, JudgeContext
from parsers.model.samples import GPU_WAIT, IDLE, IN_COLLECTIVE, ON_CPU
from parsers.model.ranges import fold


def _ranks(ranks: list[int]) -> str:
    """'rank 3' or 'ranks 0-2,5' (folded, never a Python list)."""
    return f"rank {ranks[0]}" if len(ranks) == 1 else f"ranks {fold(ranks)}"


#: no progress for this long on a rank means it has stopped (a healthy step is well under it)
HANG_AFTER_S = 2.0


@dataclass(frozen=True)
class ProgressDecision:
    """The decision and what it rests on."""

    decided: bool  #: False: no time-stamped source (no recorder state): a snapshot cannot tell
    running: bool
    source: str
    newest_age_s: dict[int, float] = field(default_factory=dict)  #: global rank -> age of its newest progress
    still: tuple[int, ...] = ()  #: ranks seen without change between two looks (collect --second-look)
    text: str = ""  #: the decision in words, where the judge words it itself (the second look)

    @property
    def stalled_ranks(self) -> list[int]:
        return sorted({r for r, age in self.newest_age_s.items() if age > HANG_AFTER_S} | set(self.still))

    def describe(self) -> str:
        if self.text:
            return self.text
        if not self.decided:
            return "no time-stamped evidence of progress (no recorder state): hang or progress cannot be told"
        ages = sorted(self.newest_age_s.values())
        if self.running and not ages:
            return f"no hang: {self.source}"
        if self.running:
            return (f"no hang: every one of {len(ages)} ranks completed or advanced an operation within "
                    f"{ages[-1]:.1f} s of collection ({self.source})")
        return (f"hung: {_ranks(self.stalled_ranks)} made no progress for over {HANG_AFTER_S:.0f} s "
                f"({self.source})")

    def to_dict(self) -> dict[str, Any]:
        return {"decided": self.decided, "running": self.running, "source": self.source,
                "stalled_ranks": self.stalled_ranks[:64], "text": self.describe()}


def judge_progress(recorder_states: list) -> ProgressDecision:
    """Running or stopped, from the recorder's per-operation times (parsers.readers.recorder.RecorderState).

    The reference moment is the collector's copy time. Files without one (a folder copied by
    hand, or read where the job writes them) are dated by the newest heartbeat among them: the
    heartbeat thread beats while its process lives, so it is the last moment the job was seen,
    and a rank that beats without progressing is stalled against it."""
    ages: dict[int, float] = {}
    beat = max((st.heartbeat_ns for st in recorder_states), default=0)
    dated_by_beat = False
    for st in recorder_states:
        ref = st.observed_ns if st.observed_is_copy else (beat or st.observed_ns)
        dated_by_beat = dated_by_beat or not st.observed_is_copy
        newest = 0
        for c in st.colls:
            newest = max(newest, c.complete_ns or 0, c.last_progress_ns or 0)
        for op in st.proxy_ops:
            newest = max(newest, op.last_progress_ns or 0)
        if not newest or not ref:
            continue
        rank = st.job_rank
        age = max(0.0, (ref - newest) / 1e9)
        ages[rank] = min(age, ages.get(rank, age))  # a rank in several communicators: its freshest progress
    if not ages:
        return ProgressDecision(False, False, "")
    running = all(age <= HANG_AFTER_S for age in ages.values())
    source = "NCCL recorder: newest completion or progress step per rank"
    if dated_by_beat:
        read = max((st.observed_ns or 0 for st in recorder_states if not st.observed_is_copy), default=0)
        lag = (read - beat) / 1e9 if read and beat else 0.0
        clock = time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime(beat / 1e9))
        # the words never hold the time of this read: reading the same copies again gives the same text
        source += f", against the newest heartbeat at {clock} (no copy time"
        source += ("; older than this read: these are copies, or the job no longer beats)" if lag > HANG_AFTER_S
                   else ")")
    return ProgressDecision(True, running, source, ages)


#: RAS answers compared for progress: the collector's first JSON read and its later one
RAS_FIRST, RAS_LATER = "ras_status.json", "ras_status_later.json"


def judge_ras_progress(artifacts: list) -> ProgressDecision:
    """Running, from two NCCL RAS reads of one host a moment apart: every rank's collective count grew.

    Why only 'running': counts that did not move in a second say nothing of a job whose steps
    are longer, so a still count never makes a hang; a count that grew at every rank of every
    communicator means no communicator is stuck, whatever a snapshot shows."""
    reads: dict[str, dict[str, dict]] = {}
    for art in artifacts:
        if art.kind != "ras-json":  # the kind first: a path's name costs more, 600,000 times at 100k ranks
            continue
        name = art.path.name
        if art.parsed and name in (RAS_FIRST, RAS_LATER):
            counts = {(f.comm, f.comm_rank): f.op_count for f in art.parsed.events
                      if getattr(f, "kind", "") == "count" and f.comm_rank is not None}
            reads.setdefault(str(art.path.parent), {})[name] = counts  # one host's folder
    pairs = [(r[RAS_FIRST], r[RAS_LATER]) for r in reads.values() if RAS_FIRST in r and RAS_LATER in r]
    if not pairs or any(not first for first, _ in pairs):
        return ProgressDecision(False, False, "")
    moved = all(later.get(key, -1) > n for first, later in pairs for key, n in first.items())
    if not moved:
        return ProgressDecision(False, False, "")
    ranks = sum(len(first) for first, _ in pairs)
    return ProgressDecision(True, True, f"NCCL RAS: the collective counts of all {ranks} communicator ranks grew "
                                "between two reads")


def judge_sampled_progress(ranks: list) -> ProgressDecision:
    """Running, from stack samples over a few seconds (`collect --samples`): every rank was caught both
    inside a collective (or waiting on the GPU) and outside one.

    Why that and not 'the stack moved': a hung rank can move (a busy loop, a polling wait) but it
    never both enters and leaves a collective; a rank stuck in one never leaves it. A job all of
    whose ranks did both within the samples completes collectives. Still samples never make a hang."""
    sampled = [r for r in ranks if r.rank is not None and getattr(r, "samples", None) is not None]
    if len(sampled) < 2 or len(sampled) != len([r for r in ranks if r.rank is not None]):
        return ProgressDecision(False, False, "")
    for r in sampled:
        s = r.samples
        inside = s.state_share(IN_COLLECTIVE) + s.state_share(GPU_WAIT)
        outside = s.state_share(ON_CPU) + s.state_share(IDLE)
        if s.taken < 5 or inside <= 0 or outside <= 0:
            return ProgressDecision(False, False, "")
    return ProgressDecision(True, True, f"py-spy samples: each of {len(sampled)} ranks was seen both inside and "
                                "outside a collective")


#: a rank whose newest step began this long before collection, or 3 of its median steps if longer, has stopped
STEP_FRESH_S = 5.0


def judge_step_progress(series: dict, collected_unix: float | None) -> ProgressDecision:
    """Running, from forensics.arm()'s step series (parsers.steps.series.StepSeries per rank) and the
    moment collection began: every rank entered a step's first collective within STEP_FRESH_S (or three
    of its median steps) before it.

    Why only 'running': the series were read from the job's store when the trigger fired, a moment
    before the collection; a rank that stepped that recently was stepping. An old newest step is no
    hang by itself (the trigger may have fired long after, or the series came from disarm())."""
    import statistics

    if collected_unix is None or len(series) < 2:
        return ProgressDecision(False, False, "")
    ages: dict[int, float] = {}
    for rank, s in series.items():
        starts = [t for t in s.first_enter if t is not None]
        if not starts or not s.seconds:
            return ProgressDecision(False, False, "")
        age = max(0.0, collected_unix - max(starts))
        if age > max(STEP_FRESH_S, 3 * statistics.median(s.seconds)):
            return ProgressDecision(False, False, "")
        ages[rank] = age
    return ProgressDecision(True, True, "forensics.arm() step series: each rank's newest step, against the "
                                "collection's start", ages)


def judge_second_look(ranks: list, collected_unix: float | None = None) -> ProgressDecision:
    """Hang or progress from two looks at each rank a few seconds apart (`collect --second-look`).

    A rank whose main-thread stack changed, whose NCCL log gained op lines or whose recorder counters
    advanced made progress; one whose stacks and counters stayed the same made none over the gap.
    Every compared rank moved: progress. Some did not: a hang, whose scope is the ranks without change
    (a rank busy elsewhere while the others wait is where a wait may end, not a hung rank). CPU time is
    not progress (NCCL waits spin). Ranks not comparable (py-spy failed, gone) are not judged; with
    fewer than one comparable rank nothing is decided. The first look is dated as an offset from the
    collection time (`collected_unix`, the manifest's) where there is one: the verdict says one collection
    time, and a clock time beside it (a few seconds later, 32 s with --gdb) would read as a second one."""
    looked = [(r.rank, r.second_look) for r in ranks
              if r.rank is not None and getattr(r, "second_look", None) is not None]
    compared = [(rank, sl) for rank, sl in looked if sl.comparable]
    if not compared:
        return ProgressDecision(False, False, "")
    still = sorted({rank for rank, sl in compared if not sl.changes})
    moved = sorted({rank for rank, sl in compared} - set(still))
    gaps = [sl.waited_s for _, sl in compared if sl.waited_s is not None]
    gap = min(gaps) if gaps else 0.0
    at = first_look_at(min(sl.first.t for _, sl in compared), collected_unix)
    source = f"collect's second look: two looks {gap:.1f} s apart, {at}"
    unjudged = sorted({rank for rank, _ in looked} - {rank for rank, _ in compared})
    tail = f"; {_ranks(unjudged)} not compared (no stack or counters in both looks)" if unjudged else ""
    if not still:
        return ProgressDecision(True, True, source, text=f"no hang: each of {len(moved)} ranks changed between two "
                                f"looks {gap:.1f} s apart ({at}: stack, read/write calls, NCCL op lines or recorder "
                                f"counts){tail}")
    part = f"; {_ranks(moved)} changed" if moved else ""
    return ProgressDecision(True, False, source, still=tuple(still),
                    text=f"hung: no progress between two looks {gap:.1f} s apart ({at}) at "
                         f"{_ranks(still)}: same main-thread stacks, read/write calls and counters{part}{tail}")


def first_look_at(first: float, collected_unix: float | None) -> str:
    """'the first 1 s after the collection time' (the manifest's, said once under the verdict), or the first
    look's own clock time 'the first at 07:20:12 UTC' where no collection time is known."""
    if collected_unix is None:
        return "the first at " + dt.datetime.fromtimestamp(first, dt.timezone.utc).strftime("%H:%M:%S") + " UTC"
    offset = first - collected_unix
    if abs(offset) < 0.5:
        return "the first at the collection time"
    return f"the first {abs(offset):.0f} s {'after' if offset > 0 else 'before'} the collection time"


def hang_from_time(progress: ProgressDecision | None, any_timeout: bool,
                   timed_out: set[int]) -> tuple[str, str, set[int]]:
    """(hang, what decided it, the hung scope): 'hang', 'progress' or 'not established', from time only
    (the progress judges above, or watchdog lines that say ranks waited past their timeout); a single
    snapshot establishes neither. The hung scope: the ranks without progress, or that timed out."""
    if progress is not None and progress.decided:
        return ("progress" if progress.running else "hang", progress.describe(),
                set() if progress.running else set(progress.stalled_ranks))
    if any_timeout:
        return ("hang", "timeouts: ranks waited on their peers past a timeout (watchdog, gloo or NCCL lines)",
                set(timed_out))
    return ("not established", "no time-stamped evidence (recorder, Flight Recorder, watchdog timeouts, a second "
            "look): one snapshot cannot tell a hang from progress", set())


def judge(ev: Evidence, ctx: JudgeContext | None = None) -> Findings:
    """Hang or progress, from time (the one protocol): the recorder's ages, else two RAS reads, else stack
    samples, else arm()'s step series, else collect's second look (the same cheap reads twice, seconds apart)."""
    progress = judge_progress(ev.recorder)
    if not progress.decided:
        progress = judge_ras_progress(ev.artifacts)
    if not progress.decided:
        progress = judge_sampled_progress(ev.ranks)
    if not progress.decided:
        progress = judge_step_progress(ev.step_series, ev.collected_unix)
    if not progress.decided:
        progress = judge_second_look(ev.ranks, ev.collected_unix)
    any_timeout, ranks = timed_out(ev)  # the lines' own word on who waited past a timeout
    return Findings("timing", judge="progress", progress=progress, timeouts=(any_timeout, frozenset(ranks)))
