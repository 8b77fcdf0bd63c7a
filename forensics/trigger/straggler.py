"""The straggler trigger: one rank persistently arrives last at the job's collectives.

Mechanism (works on gloo and NCCL alike, needs only the job's store):
  every rank   records, per step, the moment it entered the step's first collective
               (the wrapped torch.distributed call, wall clock), and publishes the last
               PUBLISH_STEPS of those in the store under its own key, every few seconds;
  the watcher  (rank 0: its process serves the store) reads every rank's key, judges
               the arrivals with the same rules as `forensics analyze` and `forensics steps`
               (parsers.judges.step_ranks.enter_times_by_step -> judge_enter_times), and raises
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
from pathlib import Path
from typing import Any, Iterable

from forensics.trigger.detector import Alarm
from forensics.trigger.election import KEY_PREFIX, read_ranks
from parsers.judges.stragglers import Stragglers, judge_enter_times
from parsers.model.ranges import fold
from parsers.judges.step_ranks import enter_times_by_step

#: steps of arrival times each rank publishes (overlap between ranks' windows is what is judged)
PUBLISH_STEPS = 64
#: seconds between a rank's publications
PUBLISH_EVERY_S = 1.0
#: the most bytes of one published value read back (hostile or corrupt values are cut)
MAX_VALUE_BYTES = 64 * 1024
#: the header of the trigger's step CSV (Trigger.write_steps, parsers.steps.series)
STEPS_HEADER = "step,seconds,end_unix_time,collective_seconds,first_enter_unix,rank\n"


def key(rank: int) -> str:
    return f"{KEY_PREFIX}/arrivals/{rank}"


#: one step as a rank publishes it: (step, first-collective enter, unix ns; step seconds; seconds inside collectives)
Row = tuple[int, int, float | None, float | None]
#: one step as read back: (step, first-collective enter, unix seconds; step seconds; seconds inside collectives)
ReadRow = tuple[int, float, float | None, float | None]


def encode(rows: Iterable[Row | tuple[int, int]]) -> str:
    """'step:ns[:step_us:coll_us] ...' for the store (compact, no pickle, no JSON nesting). Rows of
    (step, ns) only, or (step, ns, seconds, collective seconds) with seconds None when not known."""
    parts = []
    for row in rows:
        step, ns = int(row[0]), int(row[1])
        if len(row) >= 4 and row[2] is not None:
            parts.append(f"{step}:{ns}:{round(row[2] * 1e6)}:{round((row[3] or 0.0) * 1e6)}")
        else:
            parts.append(f"{step}:{ns}")
    return " ".join(parts)


def decode_rows(raw: bytes | str) -> list[ReadRow]:
    """Steps from a published value, times in seconds; malformed items are skipped, the value is cut."""
    text = raw.decode("ascii", errors="replace") if isinstance(raw, bytes) else raw
    out: list[ReadRow] = []
    for item in text[:MAX_VALUE_BYTES].split()[: PUBLISH_STEPS * 4]:
        fields = item.split(":")
        if len(fields) not in (2, 4) or not all(f.isdigit() for f in fields):
            continue
        seconds = int(fields[2]) / 1e6 if len(fields) == 4 else None
        inside = int(fields[3]) / 1e6 if len(fields) == 4 else None
        out.append((int(fields[0]), int(fields[1]) / 1e9, seconds, inside))
    return out


def decode(raw: bytes | str) -> list[tuple[int, float]]:
    """(step, unix seconds) arrivals from a published value."""
    return [(step, t) for step, t, _seconds, _inside in decode_rows(raw)]


def read_rows(store: Any, world: int, timeout: float = 5.0) -> dict[int, list[ReadRow]]:
    """rank -> published steps, for the ranks that published; bounded in time (election.read_ranks)."""
    return read_ranks(store, world, key, decode_rows, timeout, "forensics-arrivals")


def arrivals_of(rows: dict[int, list[ReadRow]]) -> dict[int, list[tuple[int, float]]]:
    """rank -> (step, unix seconds) arrivals: what the straggler rules judge."""
    return {rank: [(step, t) for step, t, _s, _c in steps] for rank, steps in rows.items()}


def write_series(folder: Path, rows: dict[int, list[ReadRow]]) -> list[Path]:
    """Every rank's published steps as `steps-rank<r>.csv` (the trigger's own CSV format, the rank in
    a column), attached to the straggler incident's bundle so that it carries the step series the
    alarm was judged on: `forensics analyze` reads them with the rest (parsers.judges.slowness).
    Steps without a duration are left out."""
    folder.mkdir(parents=True, exist_ok=True)
    written = []
    for rank, steps in sorted(rows.items()):
        lines = [f"{step},{seconds:.6f},,{inside or 0.0:.6f},{t:.6f},{int(rank)}\n"
                 for step, t, seconds, inside in steps if seconds is not None and seconds > 0]
        if lines:
            path = folder / f"steps-rank{int(rank)}.csv"
            path.write_text(STEPS_HEADER + "".join(lines))
            written.append(path)
    return written


@dataclass
class StragglerWatch:
    """Persistence over checks: the same late ranks, by at least late_ms, `persist` times in a row."""

    late_ms: float = 50.0
    persist: int = 3
    streak: int = 0
    suspects: tuple[int, ...] = ()
    last: Stragglers | None = field(default=None, repr=False)

    def observe(self, arrivals: dict[int, list[tuple[int, float]]], hosts: dict[int, str],
                step: int | None = None) -> Alarm | None:
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
               else f"rank {fold(list(late))}"
               + (f" ({hosts[late[0]]})" if len(late) == 1 and late[0] in hosts else ""))
        share = sum(found.last_share.get(r, 0.0) for r in late)
        message = (f"straggler: {who} arrives last at {share:.0%} of the last {found.ops} steps' first collective, "
                   f"median {lag:.0f} ms after the others ({self.streak} checks in a row, limit {self.late_ms:g} ms)")
        return Alarm("straggler", message, step, lag / 1000.0, late)


def _base(found: Stragglers) -> float:
    return statistics.median(found.lateness_ms.values()) if found.lateness_ms else 0.0
