"""The one-GPU benchmark's estimator and stop rule, pure functions on recorded numbers (issue 44 item 2).

Why not the median of batches with a MAD error, as before: the launch-bound one-rank cells (14-48 us a call)
scatter 3-20% batch to batch (median 7.4% and 11.7% in the 2026-12-06/07 runs' ~20 ms batches, 8.4% in
2026-12-07b's ~74 ms ones: single-call jitter would have shrunk it 1.9x): the noise is a state a batch starts in
and keeps, not jitter of single calls, and in the all_gather cells it takes two levels (about 18 and 20.5 us). The
median of a two-level mixture jumps between the levels as their weights change, and a MAD error assumes one bell:
across the three runs the A/A (two groups without the recorder) differed by more than twice its stated spread in
27 of 89 cells (7, 8 and 12 a run; ~4 expected), rms z 2.0-2.5 instead of 1 (read paired, 2026-12-07b: 5 of 29,
rms z 1.38). Part of that is not noise: in 2026-12-07b the control process ran all_reduce faster than the base
process in all 11 sizes (paired A/A -2.98% on average, sd 1.68), an offset between two processes (or their CPUs)
that no number of rounds removes; the recorder's all_reduce "cost" there (-2.0% on average) is the same offset.

So each figure is now read as
  * per round r, the recorder's batch against the same round's base batch: d_r = 100 (rec_r / base_r - 1)
    (a drift of the machine between rounds cancels);
  * the cost = the 20%-trimmed mean of the d_r: it averages over the levels (moving smoothly with their
    weights), keeps ~94% of the mean's efficiency on a bell (the median keeps 64%, so it needs ~1.5x the
    rounds), and drops the rare batch a context switch hit;
  * its spread = the standard error from a moving-block bootstrap over rounds (blocks of ~sqrt(n) consecutive
    rounds, so a state that lasts several rounds counts once per block, not once per round);
  * each mode's latency the same way (trimmed mean of its batches, block-bootstrap error, relative).
Simulated A/A on two-level batches (test_recorder_gpu_stats): levels lasting 5-10 rounds, the former estimator
states its spread ~2.7x too small (rms z 2.65), this one 1.3x; independent batches, this one 1.0-1.1. Where most
rounds find both groups at the same level, the median of the differences has the smaller spread, but it reads
the median round, not the time a call costs on average, and misses a recorder that only shifts the levels' weights.
A cell stops when the cost's and the A/A's spreads (and, with `latency_too`, each mode's) are under the target,
or at its time cap; the row says which. Rounds are kept raw in the row, so any of this can be recomputed.

`plan` turns a finished run's rows into the rounds and seconds each cell needs under a design (batch length,
estimator), from the spreads it recorded; `merge_rows` joins the rows of several device calls into one table.
"""

from __future__ import annotations

import math
import random
import statistics
from collections.abc import Callable, Sequence

TRIM = 0.2
#: the rounds a cell runs before its spread is looked at: a bootstrap of fewer says little
MIN_ROUNDS = 12
#: variance of the median / variance of the mean on a bell (pi/2), and of the 20%-trimmed mean (~1.06)
EFFICIENCY = {"median": math.pi / 2, "tmean": 1.06}


def trimmed_mean(values: Sequence[float], trim: float = TRIM) -> float:
    """The mean of the values left after cutting `trim` of them off each end (nan when empty)."""
    if not values:
        return float("nan")
    ordered = sorted(values)
    cut = int(len(ordered) * trim)
    kept = ordered[cut:len(ordered) - cut] or ordered
    return math.fsum(kept) / len(kept)


def block_length(n: int) -> int:
    """Consecutive rounds resampled together: ~sqrt(n). Simulated on two-level batches whose level lasts 5-10
    rounds (test_recorder_gpu_stats), blocks of n^(1/3) still understated the spread (rms z 1.7), sqrt(n) 1.3."""
    return max(1, round(n ** 0.5))


def block_bootstrap_se(values: Sequence[float], stat: Callable[[Sequence[float]], float] = trimmed_mean,
                       reps: int = 200, seed: int = 0) -> float:
    """Standard error of stat(values) by a moving-block bootstrap over the sequence (inf under MIN_ROUNDS
    values). Seeded by the caller, so a recorded run gives the same spread every time it is recomputed."""
    n = len(values)
    if n < MIN_ROUNDS:
        return float("inf")
    block = block_length(n)
    starts = n - block + 1
    rng = random.Random(seed * 1_000_003 + n)
    draws = []
    for _ in range(reps):
        sample: list[float] = []
        while len(sample) < n:
            s = rng.randrange(starts)
            sample.extend(values[s:s + block])
        draws.append(stat(sample[:n]))
    return statistics.pstdev(draws)


def round_diffs(base: Sequence[float], other: Sequence[float]) -> list[float]:
    """Per round, other's batch against the same round's base batch, in %."""
    return [(o / b - 1) * 100 for b, o in zip(base, other) if b > 0]


def paired_figure(base: Sequence[float], other: Sequence[float]) -> dict:
    """The cost of other against base: trimmed mean of the per-round differences (%), its block-bootstrap
    spread in points, and the median of the differences (the former estimator, kept for comparison)."""
    diffs = round_diffs(base, other)
    return {"pct": trimmed_mean(diffs) if len(diffs) >= 3 else float("nan"), "spread": block_bootstrap_se(diffs),
            "median_pct": statistics.median(diffs) if diffs else float("nan"), "lag1": lag1(diffs),
            "n": len(diffs)}


def lag1(values: Sequence[float]) -> float:
    """Correlation of each round's value with the next one's: near 0 when rounds are independent; well above
    it when a state lasts several rounds (then the bootstrap's blocks matter and the next run wants longer
    ones). nan under 3 values or none varying."""
    if len(values) < 3:
        return float("nan")
    mean = math.fsum(values) / len(values)
    dev = [v - mean for v in values]
    den = math.fsum(d * d for d in dev)
    return math.fsum(a * b for a, b in zip(dev, dev[1:])) / den if den > 0 else float("nan")


def latency_figure(values: Sequence[float]) -> dict:
    """One mode's seconds per call over its batches: trimmed mean (us), its spread (% of it), the median (us)."""
    est = trimmed_mean(values)
    se = block_bootstrap_se(values)
    return {"tmean_us": est * 1e6, "median_us": statistics.median(values) * 1e6 if values else float("nan"),
            "spread_pct": 100 * se / est if est > 0 else float("inf"), "n": len(values)}


def resolved(samples: dict[str, list[float]], target: float, latency_too: bool = False) -> bool:
    """The stop rule: every paired figure against the base (the recorder's cost, the A/A) has a spread under
    `target` points; with latency_too, each mode's latency too (relative). A constant offset between two
    processes is not spread: it shows as the A/A's value, and more rounds cannot remove it."""
    if any(len(v) < MIN_ROUNDS for v in samples.values()):
        return False
    if any(paired_figure(samples["base"], v)["spread"] >= target for m, v in samples.items() if m != "base"):
        return False
    return not latency_too or all(latency_figure(v)["spread_pct"] < target for v in samples.values())


def next_check(rounds: int) -> int:
    """When to look at the spread again: after 15% more rounds (a bootstrap every round would cost more
    than the batches)."""
    return max(rounds + 1, int(rounds * 1.15))


def rounds_needed(spread: float, n: int, target: float, efficiency_ratio: float = 1.0) -> float:
    """Rounds for `spread` (seen after n rounds) to fall to target: spread ~ 1/sqrt(n); efficiency_ratio
    scales for another estimator (its variance over the recorded one's)."""
    return n * (spread / target) ** 2 * efficiency_ratio


def plan(rows: list[dict], target: float, batch_s: float, cap_s: float = float("inf"), modes: int = 3) -> list[dict]:
    """Per recorded cell: rounds and seconds to reach `target` with (a) the recorded design (its batches, the
    median of paired rounds) and (b) batches of batch_s read with the trimmed mean, assuming a batch's scatter
    does not depend on its length (what 10-30 ms against 40-90 ms batches showed), capped at cap_s (then
    the spread expected at the cap). The time a round spends outside its batches (answers over the pipe,
    warm-up calls, syncs) is the median over the run's cells of what their seconds show."""
    cells = [r for r in rows if "error" not in r and "recorder" in r.get("paired", {}) and r.get("seconds")]
    extra = [max(0.0, r["seconds"] / r["paired"]["recorder"]["n"] / modes - batch_of(r)) for r in cells]
    overhead = statistics.median(extra) if extra else 0.0
    out = []
    for r in cells:
        n = r["paired"]["recorder"]["n"]
        spread = max(p["spread"] for p in r["paired"].values())
        need_now = max(MIN_ROUNDS, rounds_needed(spread, n, target))
        need_new = max(MIN_ROUNDS, rounds_needed(spread, n, target, EFFICIENCY["tmean"] / EFFICIENCY["median"]))
        round_new = modes * (min(batch_s, batch_of(r)) + overhead)
        seconds_new = min(need_new * round_new, cap_s)
        reached = seconds_new / round_new
        out.append({"what": r["what"], "bytes": r.get("bytes"), "spread": spread, "n": n,
                    "batch_ms": batch_of(r) * 1e3, "overhead_ms": overhead * 1e3,
                    "rounds_now": need_now, "seconds_now": need_now * r["seconds"] / n,
                    "rounds_new": need_new, "seconds_new": seconds_new, "capped": need_new > reached + 0.5,
                    "spread_new": target * math.sqrt(need_new / reached)})
    return out


def batch_of(row: dict) -> float:
    """Seconds of one of the row's batches: calls per batch x the base's seconds per call."""
    return row["base"]["median_us"] * 1e-6 * row["per_batch"]


def cell_key(row: dict) -> tuple:
    return (row.get("layout"), row.get("what"), row.get("bytes"))


def merge_rows(parts: list[list[dict]]) -> tuple[list[dict], list[dict]]:
    """The rows of several device calls as one table, in the order first seen: a cell measured in more than
    one call keeps the last call's row, and each earlier figure is listed (their differences are the
    call-to-call floor: other processes, other CPUs). Returns (rows, repeats)."""
    merged: dict[tuple, dict] = {}
    repeats = []
    for index, rows in enumerate(parts):
        for row in rows:
            key = cell_key(row)
            if key in merged and "error" not in merged[key]:
                earlier = merged[key]
                repeats.append({"cell": list(key), "part": index, "earlier": cost_of(earlier), "later": cost_of(row)})
            if key not in merged or "error" not in row or "error" in merged[key]:
                merged[key] = row
    return list(merged.values()), repeats


def cost_of(row: dict) -> dict | None:
    """A row's recorder cost as the verdict reads it (paired when there), or None for an error row."""
    if "error" in row:
        return None
    pair = row.get("paired", {}).get("recorder")
    if pair:
        return {"pct": pair["pct"], "spread": pair["spread"]}
    b, c = row["base"], row["recorder"]
    return {"pct": (c["median_us"] / b["median_us"] - 1) * 100, "spread": math.hypot(b["spread_pct"], c["spread_pct"])}


def last_rows(lines: list[str], loads: Callable[[str], dict]) -> list[dict]:
    """A results.jsonl's rows, a refined cell's later line superseding its earlier one (order of first sight)."""
    rows: dict[tuple, dict] = {}
    for line in lines:
        if line.strip():
            row = loads(line)
            rows[cell_key(row)] = row
    return list(rows.values())
