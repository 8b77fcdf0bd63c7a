"""Across ranks: whose steps are slow, or is the slowdown job-wide? From the per-rank step series of arm().

Why not the step times themselves: in a synchronous job every rank's step lasts the
same, because the fast ranks wait in the collectives for the slow one. What differs is
*when* each rank arrives: arm() records, per step, the moment the rank entered the
step's first collective (`first_enter_unix`) and the seconds it spent inside collectives
(`collective_seconds`). The straggler arrives last, step after step, and waits least.

Rules: the arrival times per step are judged exactly as enter times of collectives are
(parsers.judges.stragglers.judge_enter_times: lateness against the step's median, the
same thresholds, a slow host when all the late ranks share one). Series without arrival
times fall back to the time spent outside collectives per step (step - collective
seconds), which exceeds the others' by the same lateness in a steady state. With no late
rank, the step series of the job (per step, the median over ranks) is classified
(parsers.steps.classify): a pattern there is a job-wide slowdown, alike on every rank.
It lives in judges/ (it was parsers/steps/ranks.py): it judges, with the straggler rules of
judges.stragglers, while parsers/steps/ reads and classifies one series and imports no judge.
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass, field
from typing import Any, Iterable, Mapping

from parsers.judges.stragglers import EnterTimes, Stragglers, judge_enter_times
from parsers.model.ranges import fold
from parsers.steps.classify import StepFinding, Settings, classify
from parsers.steps.series import StepSeries

ARRIVAL = "first-collective enter times"
OUTSIDE = "time outside collectives"
#: the key of one step in EnterTimes (communicator, function, seq): steps are one sequence
STEP_KEY = ("steps", "first-collective")


@dataclass
class RankSteps:
    """What the per-rank series say."""

    ranks: list[int] = field(default_factory=list)
    source: str = ""  #: ARRIVAL, OUTSIDE, or '' when the series carry neither
    found: Stragglers = field(default_factory=Stragglers)
    job_wide: list[StepFinding] = field(default_factory=list)  #: patterns of the job's median series (no late rank)
    files: dict[int, str] = field(default_factory=dict)  #: rank -> series file, to cite

    @property
    def late(self) -> list[int]:
        return list(self.found.late)

    def describe(self) -> str:
        cite = f" (forensics.arm() step series of {len(self.ranks)} ranks, {self.source})" if self.source else ""
        if not self.source:
            return ("step series without per-step arrival or collective times (recorded by forensics.arm() since "
                    "issue 15): synchronous steps last alike on every rank, so they cannot tell a straggler")
        if self.found.late:
            if self.source == ARRIVAL:
                return self.found.describe().replace(" collectives,", " steps' first collectives,") + cite
            who = (f"host {self.found.slow_host} (ranks {fold(self.late)})" if self.found.slow_host
                   else f"rank {fold(self.late)}")
            lag = statistics.median(self.found.lateness_ms[r] for r in self.late)
            return f"{who} spends a median {lag:.0f} ms more per step outside collectives than the others" + cite
        if self.found.ops and self.job_wide:
            return (f"no straggler: no rank arrives late (threshold {self.found.threshold_ms:.0f} ms over "
                    f"{self.found.ops} steps); job-wide: {self.job_wide[0].title}, on every rank alike" + cite)
        return self.found.describe().replace("collectives", "steps") + cite

    def to_dict(self) -> dict[str, Any]:
        return {"ranks": self.ranks, "source": self.source, "late": self.late, "slow_host": self.found.slow_host,
                "stragglers": self.found.to_dict(), "job_wide": [f.kind for f in self.job_wide],
                "files": {str(k): v for k, v in sorted(self.files.items())}, "text": self.describe()}


def enter_times_by_step(by_rank: Mapping[int, Iterable[tuple[int, float]]]) -> EnterTimes:
    """(step key, step) -> {rank: arrival ns}, from per-rank (step, unix seconds) pairs (arm()'s records)."""
    out: EnterTimes = {}
    for rank, pairs in by_rank.items():
        for step, t in pairs:
            if t is not None and t > 0:
                out.setdefault((*STEP_KEY, int(step)), {})[rank] = int(t * 1e9)
    return out


def compare_ranks(series: dict[int, StepSeries], hosts: dict[int, str] | None = None, warmup: int = 3) -> RankSteps:
    """Which rank's steps are slow relative to the others, or whether the slowdown is job-wide (see the module doc)."""
    out = RankSteps(ranks=sorted(series), files={r: s.source for r, s in series.items() if s.source})
    arrival = {r: [(st, t) for st, t in zip(s.steps, s.first_enter) if t is not None and st >= warmup]
               for r, s in series.items()}
    outside = {r: [(st, d - c) for st, d, c in zip(s.steps, s.seconds, s.collective_seconds)
                   if c is not None and st >= warmup]
               for r, s in series.items()}
    if sum(1 for v in arrival.values() if v) >= 2:
        out.source = ARRIVAL
        # arrival stamps come from each host's clock: within about a millisecond under NTP, below the thresholds
        out.found = judge_enter_times(enter_times_by_step(arrival), dict(hosts or {}), resolution_ms=0.001)
    elif sum(1 for v in outside.values() if v) >= 2:
        out.source = OUTSIDE
        out.found = judge_enter_times(_outside_as_enter(outside), dict(hosts or {}), resolution_ms=0.001)
    else:
        return out
    if not out.found.late:
        out.job_wide = classify(_job_series(series), Settings(warmup=warmup))
    return out


def _outside_as_enter(outside: dict[int, list[tuple[int, float]]]) -> EnterTimes:
    """Time outside collectives as pseudo enter times: per step, each rank's own outside seconds.

    judge_enter_times compares each rank with the step's median, so a per-step value
    works as an 'enter time': the rank that spends most time outside is the late one."""
    return enter_times_by_step({r: [(st, v + 1.0) for st, v in pairs] for r, pairs in outside.items()})


def _job_series(series: dict[int, StepSeries]) -> StepSeries:
    """Per step, the median step time over the ranks that recorded it: the job's own pace."""
    per_step: dict[int, list[float]] = {}
    for s in series.values():
        for st, d in zip(s.steps, s.seconds):
            per_step.setdefault(st, []).append(d)
    steps = sorted(per_step)
    return StepSeries(seconds=[statistics.median(per_step[st]) for st in steps], steps=steps, source="job median")
