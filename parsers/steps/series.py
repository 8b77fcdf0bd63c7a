"""Reads per-step times: the trigger's CSV (step,seconds,...), any CSV with a step-time column, JSON, or one number
a line.

A run that was restarted shows up as step numbers going back (a log appended across
restarts) or as a wall-clock gap; both split the series into segments.
"""

from __future__ import annotations

import csv
import io
import json
from dataclasses import dataclass, field
from pathlib import Path
from parsers.input import bounded_json
from parsers.input.errors import FileFormatError

TIME_COLUMNS = ("seconds", "step_time", "step_seconds", "time", "duration", "elapsed")


class SeriesError(FileFormatError):
    """The file holds no usable step times; the message says why."""


@dataclass
class StepSeries:
    """Step durations in order, with the index where each restarted segment begins."""

    seconds: list[float]
    steps: list[int] = field(default_factory=list)
    restarts: list[int] = field(default_factory=list)  #: indexes into `seconds` where a new run starts
    source: str = ""
    #: per step, seconds spent inside collectives (arm() since issue 15), None where not recorded
    collective_seconds: list[float | None] = field(default_factory=list)
    #: per step, unix time the rank entered the step's first collective (arm() since issue 15), None where not recorded
    first_enter: list[float | None] = field(default_factory=list)
    rank: int | None = None  #: the rank whose series it is, when the file says so (arm()'s `rank` column)

    def segments(self) -> list[tuple[int, int]]:
        """(start, end) index ranges of each run between restarts."""
        bounds = [0, *sorted(set(r for r in self.restarts if 0 < r < len(self.seconds))), len(self.seconds)]
        return [(a, b) for a, b in zip(bounds, bounds[1:]) if b > a]


def parse_series(text: str, source: str = "") -> StepSeries:
    """Step times from CSV (header with a time column), JSON (list or {"seconds": [...]}) or bare numbers."""
    stripped = text.strip()
    if not stripped:
        raise SeriesError(f"{source or 'input'}: empty")
    if stripped[0] in "[{":
        return _from_json(stripped, source)
    first = stripped.splitlines()[0]
    if any(c.isalpha() for c in first):
        return _from_csv(stripped, source)
    values = []
    for number, line in enumerate(stripped.splitlines(), 1):
        line = line.strip()
        if line:
            values.append(_positive(line, f"{source}:{number}"))
    return StepSeries(seconds=values, steps=list(range(len(values))), source=source)


def read_series(path: Path) -> StepSeries:
    try:
        text = Path(path).read_text(errors="replace")
    except OSError as err:
        raise SeriesError(f"{path}: {err.strerror or err}") from err
    return parse_series(text, str(path))


def _positive(raw: str, where: str) -> float:
    try:
        value = float(raw)
    except ValueError as err:
        raise SeriesError(f"{where}: {raw!r} is not a number") from err
    if not value > 0 or value != value or value == float("inf"):
        raise SeriesError(f"{where}: step time must be a positive number, got {raw!r}")
    return value


def _optional(raw: str | None) -> float | None:
    """A non-negative finite number, else None (an empty cell: that step had no collective)."""
    try:
        value = float((raw or "").strip())
    except ValueError:
        return None
    return value if 0 <= value < float("inf") else None


def _from_json(text: str, source: str) -> StepSeries:
    try:
        data = bounded_json.loads(text)
    except json.JSONDecodeError as err:
        raise SeriesError(f"{source}: not valid JSON ({err})") from err
    if isinstance(data, dict):
        data = data.get("seconds") or data.get("step_times")
    if not isinstance(data, list) or not data:
        raise SeriesError(f"{source}: expected a list of step times or {{\"seconds\": [...]}}")
    values = [_positive(str(v), f"{source}[{i}]") for i, v in enumerate(data)]
    return StepSeries(seconds=values, steps=list(range(len(values))), source=source)


def _from_csv(text: str, source: str) -> StepSeries:
    try:
        return _read_csv(text, source)
    except csv.Error as err:  # a field with a stray newline or NUL: the file's fault (found by the fuzzer)
        raise SeriesError(f"{source}: not a readable CSV ({err})") from err


def _read_csv(text: str, source: str) -> StepSeries:
    reader = csv.DictReader(io.StringIO(text))
    fields = [f.strip().lower() for f in (reader.fieldnames or [])]
    column = next((c for c in TIME_COLUMNS if c in fields), None)
    if column is None:
        raise SeriesError(f"{source}: no step-time column (one of {', '.join(TIME_COLUMNS)}) in header {fields}")
    original = (reader.fieldnames or [])[fields.index(column)]
    step_col = next((f for f in (reader.fieldnames or []) if f.strip().lower() in ("step", "iteration", "iter")), None)
    end_col = next((f for f in (reader.fieldnames or [])
                    if f.strip().lower() in ("end_unix_time", "timestamp", "time_unix")), None)
    coll_col = next((f for f in (reader.fieldnames or []) if f.strip().lower() == "collective_seconds"), None)
    enter_col = next((f for f in (reader.fieldnames or []) if f.strip().lower() == "first_enter_unix"), None)
    rank_col = next((f for f in (reader.fieldnames or []) if f.strip().lower() == "rank"), None)
    ranks: set[str] = set()
    series = StepSeries(seconds=[], source=source)
    last_step: int | None = None
    last_end: float | None = None
    for number, row in enumerate(reader, 2):
        raw = (row.get(original) or "").strip()
        if not raw:
            continue
        value = _positive(raw, f"{source}:{number}")
        step = int(float(row[step_col])) if step_col and (row.get(step_col) or "").strip() else len(series.seconds)
        end = float(row[end_col]) if end_col and (row.get(end_col) or "").strip() else None
        restarted = last_step is not None and step <= last_step
        if end is not None and last_end is not None and end - value - last_end > max(60.0, 20 * value):
            restarted = True  # a long silence between steps: the job was restarted
        if restarted and series.seconds:
            series.restarts.append(len(series.seconds))
        series.seconds.append(value)
        series.steps.append(step)
        series.collective_seconds.append(_optional(row.get(coll_col) if coll_col else None))
        series.first_enter.append(_optional(row.get(enter_col) if enter_col else None))
        if rank_col:
            ranks.add((row.get(rank_col) or "").strip())
        last_step, last_end = step, end
    if not series.seconds:
        raise SeriesError(f"{source}: no step times in column {original!r}")
    if len(ranks) == 1 and (only := ranks.pop()).isdigit() and len(only) <= 7:
        series.rank = int(only)  # one rank in every row: whose series it is (rows that disagree: nobody's)
    return series
