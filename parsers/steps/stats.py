"""Small robust statistics for step-time series (no numpy: series are short and this stays dependency-free)."""

from __future__ import annotations

import statistics
from collections import Counter


def robust_spread(values: list[float], center: float) -> float:
    """Median absolute deviation scaled to a standard deviation (1.4826 x MAD)."""
    return 1.4826 * statistics.median(abs(v - center) for v in values) if values else 0.0


def slope(values: list[float]) -> float:
    """Least-squares slope of values against their index."""
    n = len(values)
    if n < 2:
        return 0.0
    mean_x = (n - 1) / 2
    mean_y = sum(values) / n
    num = sum((i - mean_x) * (v - mean_y) for i, v in enumerate(values))
    den = sum((i - mean_x) ** 2 for i in range(n))
    return num / den


def lag1_autocorrelation(values: list[float]) -> float:
    """Correlation of each value with the next: ~0 for white noise, near 1 for slow drifts and plateaus."""
    n = len(values)
    if n < 3:
        return 0.0
    mean = sum(values) / n
    var = sum((v - mean) ** 2 for v in values)
    if var == 0:
        return 0.0
    return sum((values[i] - mean) * (values[i + 1] - mean) for i in range(n - 1)) / var


def rolling_median(values: list[float], window: int) -> list[float]:
    half = window // 2
    return [statistics.median(values[max(0, i - half) : i + half + 1]) for i in range(len(values))]


def dominant_period(indexes: list[int], tolerance: int = 1) -> tuple[int, float] | None:
    """(period, score) for event positions that fall on a regular lattice, or None.

    Each gap between events proposes a period; a period scores the share of events on
    its lattice (same phase, +-tolerance) times the share of lattice points in the span
    that do have an event. Stray events (noise) lower the score without hiding the period.
    """
    if len(indexes) < 3:
        return None
    best: tuple[int, float] | None = None
    for candidate in sorted({b - a for a, b in zip(indexes, indexes[1:]) if b - a >= 2}):
        phases = Counter(i % candidate for i in indexes)
        phase = phases.most_common(1)[0][0]
        on = [i for i in indexes if min((i - phase) % candidate, (phase - i) % candidate) <= tolerance]
        if len(on) < 3:
            continue
        expected = (on[-1] - on[0]) // candidate + 1
        score = (len(on) / len(indexes)) * min(1.0, len(on) / expected)
        if best is None or score > best[1] + 1e-9:
            best = (candidate, score)
    return best
