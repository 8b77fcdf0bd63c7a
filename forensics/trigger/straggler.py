"""The straggler trigger: one rank persistently arrives last at the job's collectives.

Mechanism (works on gloo and NCCL alike, needs only the job's store):
  every rank   records, per step, the moment it entered the step's first collective
               (the wrapped torch.distributed call, wall clock), and publishes the last
               PUBLISH_STEPS of those in the store under its own key, every few seconds;
  the watcher  (rank 0: its process serves the store) reads every rank's key, judges
               the arrivals with the same rules as `forensics analyze` and `forensics steps`
               (parsers.steps.ranks.enter_times_by_step -> judge_enter_times), and raises
               an alarm when the same rank(s) are late by at least `late_ms` in
               `persist` checks in a row.
Why the watcher and not each rank for itself: a rank knows it waits, not for whom; only
a view across ranks names the straggler. Why rank 0: one reader, not a thousand.
Clocks of different hosts agree to about a millisecond under NTP, well below late_ms.
Store traffic: one small set per rank per PUBLISH_EVERY_S, world gets per check.
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass, field
from typing import Any, Iterable

from forensics.trigger.detector import Alarm
from forensics.trigger.election import KEY_PREFIX, read_ranks
from parsers.judges.stragglers import Stragglers, judge_enter_times
from parsers.ranges import fold
from parsers.steps.ranks import enter_times_by_step

#: steps of arrival times each rank publishes (overlap between ranks' windows is what is judged)
PUBLISH_STEPS = 64
#: seconds between a rank's publications
PUBLISH_EVERY_S = 1.0
#: the most bytes of one published value read back (hostile or corrupt values are cut)
MAX_VALUE_BYTES = 64 * 1024


def key(rank: int) -> str:
    return f"{KEY_PREFIX}/arrivals/{rank}"


def encode(arrivals: Iterable[tuple[int, int]]) -> str:
    """'step:ns step:ns ...' for the store (compact, no pickle, no JSON nesting)."""
    return " ".join(f"{int(s)}:{int(t)}" for s, t in arrivals)


def decode(raw: bytes | str) -> list[tuple[int, float]]:
    """(step, unix seconds) pairs from a published value; malformed items are skipped."""
    text = raw.decode("ascii", errors="replace") if isinstance(raw, bytes) else raw
    out = []
    for item in text[:MAX_VALUE_BYTES].split()[: PUBLISH_STEPS * 4]:
        step, _, ns = item.partition(":")
        if step.isdigit() and ns.isdigit():
            out.append((int(step), int(ns) / 1e9))
    return out


def read_arrivals(store: Any, world: int, timeout: float = 5.0) -> dict[int, list[tuple[int, float]]]:
    """rank -> published arrivals, for the ranks that published; bounded in time (election.read_ranks)."""
    return read_ranks(store, world, key, decode, timeout, "forensics-arrivals")


@dataclass
class StragglerWatch:
    """Persistence over checks: the same late ranks, by at least late_ms, `persist` times in a row."""

    late_ms: float = 50.0
    persist: int = 3
    streak: int = 0
    suspects: tuple[int, ...] = ()
    last: Stragglers | None = field(default=None, repr=False)

    def observe(self, arrivals: dict[int, list[tuple[int, float]]], hosts: dict[int, str], step: int | None = None) -> Alarm | None:
        """Judge one read of every rank's arrivals; an Alarm when the same straggler persisted."""
        found = judge_enter_times(enter_times_by_step(arrivals), hosts, resolution_ms=0.001)
        self.last = found
        late = tuple(r for r in found.late if found.lateness_ms.get(r, 0.0) - _base(found) >= self.late_ms)
        if not late:
            self.streak, self.suspects = 0, ()
            return None
        self.streak = self.streak + 1 if late == self.suspects else 1
        self.suspects = late
        if self.streak < self.persist:
            return None
        lag = statistics.median(found.lateness_ms[r] for r in late)
        who = (f"host {found.slow_host} (ranks {fold(list(late))})" if found.slow_host
               else f"rank {fold(list(late))}" + (f" ({hosts[late[0]]})" if len(late) == 1 and late[0] in hosts else ""))
        share = sum(found.last_share.get(r, 0.0) for r in late)
        message = (f"straggler: {who} arrives last at {share:.0%} of the last {found.ops} steps' first collective, "
                   f"median {lag:.0f} ms after the others ({self.streak} checks in a row, limit {self.late_ms:g} ms)")
        return Alarm("straggler", message, step, lag / 1000.0, late)


def _base(found: Stragglers) -> float:
    return statistics.median(found.lateness_ms.values()) if found.lateness_ms else 0.0
