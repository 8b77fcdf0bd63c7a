"""Inputs from another job: files given beside a bundle whose own words say they are not its ranks'.

Why: `forensics analyze BUNDLE extra.log` merges every file into one verdict. A log of another job (its
ranks' pids, its world size, its host, its Slurm job id) would then make ranks 'absent' or 'agree' with a
culprit it never saw. The bundle's manifest says which processes the job has; a loose file that states a
world size, a pid, a host, a rank or a job id outside those, or whose dated lines all lie more than a day
outside the bundle's own time (its collection and its files' lines), is evidence of another job, and the verdict
says so (typed here, worded in forensics/report/words/mixed.py) instead of merging it in silence.
Pure: reads the evidence only.
"""

from __future__ import annotations

import calendar
import time
from dataclasses import dataclass
from typing import Any

from parsers.readers import stamps
from parsers.gather.evidence import Evidence

#: why a file is another job's, in the order said
WORLD, PID, HOST, RANK, JOB, TIME = "world-size", "pid", "host", "rank", "job-id", "time"

#: a loose file whose dated lines all lie this far outside the bundle's time is another run's. A day: logs print
#: local time without a zone (up to 14 h off UTC), and a job's own logs end where it hangs, before its collection
FAR_S = 86400.0


@dataclass(frozen=True)
class ForeignInput:
    """A file that its own words place in another job, and what says so (name, the file's value, the bundle's)."""

    file: str
    reasons: tuple[tuple[str, Any, Any], ...]

    def to_dict(self) -> dict[str, Any]:
        return {"file": self.file,
                "reasons": [{"what": w, "file_says": f, "bundle_says": b} for w, f, b in self.reasons]}


def _bundle_identity(ev: Evidence) -> dict[str, set]:
    ranks = ev.manifest.ranks if ev.manifest is not None else []
    return {WORLD: {r.world_size for r in ranks if r.world_size}, PID: {r.pid for r in ranks if r.pid},
            HOST: {r.host for r in ranks if r.host}, JOB: {getattr(r, "job_id", None) for r in ranks} - {None}}


def _reasons(facts: dict[str, Any], known: dict[str, set]) -> list[tuple[str, Any, Any]]:
    out = []
    for what, key in ((WORLD, "world_size"), (PID, "pid"), (HOST, "host"), (JOB, "job_id")):
        value = facts.get(key)
        if value is not None and known[what] and value not in known[what]:
            out.append((what, value, sorted(known[what], key=str)))
    rank, world = facts.get("rank"), max(known[WORLD], default=None)
    if isinstance(rank, int) and world and not 0 <= rank < world:
        out.append((RANK, rank, world))
    return out


def _unix(stamp: str | None, near: float) -> float | None:
    """A log stamp (parsers.readers.stamps: glog, ISO, month-day; most have no year) as seconds since the epoch, read as
    UTC in the year that puts it nearest `near`; None for text that is no stamp."""
    k = stamps.key(stamp)
    if k is None:
        return None
    month, day, seconds = k
    year = time.gmtime(near).tm_year
    found = []
    for y in (year - 1, year, year + 1):
        try:
            found.append(calendar.timegm((y, month, day, 0, 0, 0, 0, 0, 0)) + seconds)
        except (ValueError, OverflowError):
            continue
    return min(found, key=lambda t: abs(t - near), default=None)


def _dated(art: Any, near: float) -> list[float]:
    """The times of an artifact's dated lines (its events' stamps)."""
    out = []
    for e in art.parsed.events if art.parsed is not None else []:
        t = _unix(getattr(e, "timestamp", None), near)
        if t is not None:
            out.append(t)
    return out


def _bundle_window(ev: Evidence) -> tuple[float, float] | None:
    """(earliest, latest) of the bundle's own time: its collection (the manifest's) and its files' dated lines."""
    near = ev.collected_unix
    if near is None:
        return None
    times = [near] + [t for art in ev.artifacts if art.hints.from_manifest for t in _dated(art, near)]
    return min(times), max(times)


def _time_reason(art: Any, window: tuple[float, float] | None) -> tuple[str, Any, Any] | None:
    """(TIME, the file's (first, last), the bundle's window) where every dated line of the file lies more than
    FAR_S outside the window; None where it overlaps, or the file or the bundle has no date."""
    if window is None:
        return None
    times = _dated(art, (window[0] + window[1]) / 2)
    if not times or not (max(times) < window[0] - FAR_S or min(times) > window[1] + FAR_S):
        return None
    return TIME, [min(times), max(times)], list(window)


def foreign_inputs(ev: Evidence) -> list[ForeignInput]:
    """Files given beside a bundle (not listed in its manifest) whose stated identity is not the bundle's job.
    A pid or a host alone is not enough (a bundle of one host plus the other hosts' logs is one job; a rank's log
    written by a child names another pid): a file is another job's when its world size or job id disagrees, its
    rank lies outside the job, or its dated lines all lie more than FAR_S outside the bundle's time, the pid and
    host adding to the reasons."""
    if ev.manifest is None or not ev.manifest.ranks:
        return []
    known = _bundle_identity(ev)
    window = _bundle_window(ev)
    out = []
    for art in ev.artifacts:
        if art.hints.from_manifest or art.parsed is None:
            continue
        reasons = _reasons(art.parsed.facts, known)
        reasons += [r for r in [_time_reason(art, window)] if r is not None]
        if any(what in (WORLD, JOB, RANK, TIME) for what, _f, _b in reasons):
            out.append(ForeignInput(art.rel or str(art.path), tuple(reasons)))
    return out
