"""Decides when a job has stopped making progress, or a step runs far longer than recent ones.

Pure logic over timestamps handed in by the caller, so it is tested without a job:
  stall      no step finished and no collective completed for `stall_after` seconds
  slow step  the running step has lasted `slow_factor` x the median of the last
             `window` steps (and at least `min_slow` seconds): caught while it is
             still running, when its stacks are still worth taking
"""

from __future__ import annotations

import statistics
from collections import deque
from dataclasses import dataclass


@dataclass
class Alarm:
    """Why the trigger fires: kind 'stall', 'slow-step' or 'straggler', with a human sentence."""

    kind: str
    message: str
    step: int | None = None
    waited: float = 0.0
    ranks: tuple[int, ...] = ()  #: the ranks it names (a straggler alarm names the late ones)


class Detector:
    """Keeps recent step times and the last moment of progress; `check(now)` says whether to fire."""

    def __init__(self, stall_after: float = 60.0, slow_factor: float = 4.0, window: int = 20, min_history: int = 5,
                 min_slow: float = 1.0) -> None:
        self.stall_after = stall_after
        self.slow_factor = slow_factor
        self.min_history = min_history
        self.min_slow = min_slow
        self.recent: deque[float] = deque(maxlen=window)
        self.step = 0
        self.step_started: float | None = None
        self.last_progress: float | None = None
        self.collectives = 0

    def start(self, now: float) -> None:
        """The loop begins (arm time): the stall clock starts here, not at the first step."""
        self.last_progress = now
        self.step_started = now

    def step_done(self, now: float) -> float | None:
        """A step ended: record its duration; the next one starts now. Returns the duration."""
        duration = None
        if self.step_started is not None and self.step > 0:
            duration = now - self.step_started
            self.recent.append(duration)
        self.step += 1
        self.step_started = now
        self.last_progress = now
        return duration

    def collective_done(self, now: float) -> None:
        """A collective completed: the job moves even if a step is long (e.g. evaluation)."""
        self.collectives += 1
        self.last_progress = now

    def typical_step(self) -> float | None:
        """Median of recent step times, once there are enough of them to trust."""
        if len(self.recent) < self.min_history:
            return None
        return statistics.median(self.recent)

    def check(self, now: float) -> Alarm | None:
        """An Alarm when the job stalls or the current step is abnormally slow; else None."""
        if self.last_progress is not None and now - self.last_progress >= self.stall_after:
            idle = now - self.last_progress
            return Alarm("stall", f"no step or collective completed for {idle:.1f} s (limit {self.stall_after:g} s) in "
                                  f"step {self.step}", self.step, idle)
        typical = self.typical_step()
        if typical is not None and self.step_started is not None:
            elapsed = now - self.step_started
            limit = max(self.min_slow, self.slow_factor * typical)
            if elapsed >= limit:
                return Alarm("slow-step",
                             f"step {self.step} has run {elapsed:.1f} s, {elapsed / max(typical, 1e-9):.0f}x the "
                             f"median {typical:.3f} s of the last {len(self.recent)} steps", self.step, elapsed)
        return None
