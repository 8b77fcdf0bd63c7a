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
  * the cost = the median of the d_r, as before: a fixed cost a call moves both levels alike, and the rounds
    that find both groups at the same level (most of them) pin it down, where a mean carries the levels'
    gap (13%) as noise: in the simulation below the mean's spread was 3-4x the median's, 10x the rounds;
  * its spread = the larger of two standard errors over the rounds in time order: a moving-block bootstrap
    (blocks of ~sqrt(n) rounds) and the batch means of 10 contiguous stretches. A state that lasts several
    rounds counts once per block or stretch, not once per round;
  * beside it the 20%-trimmed mean of the same d_r with its spread: the average round. Where the two part by
    more than twice their spreads the table says "levels": the recorder may change how often a batch sits at
    the slow level, which the median does not see;
  * each mode's latency the same way (median of its batches, the same spread, relative).
A cell stops when the cost's and the A/A's spreads (with `latency_too`, each mode's too) are under the target,
after at least MIN_ROUNDS rounds and the caller's minimum seconds, or at its time cap; the row says which.
Rounds are kept raw in the row, so all of this can be recomputed.

Simulated (test_recorder_gpu_stats; two levels 18 / 20.5 us, 1% jitter, levels independent or lasting 5-10
rounds): the former MAD spread was 2.7x too small where levels last (rms z 2.65); a bootstrap alone with
n^(1/3) blocks 1.7x. With adaptive stopping, checks after every 15% more rounds, this spread, 30 rounds and
~125 rounds at least: rms z 0.68-0.96 over four mixtures, 285-865 rounds to 0.2-0.5 points; the trimmed mean
reached them in 3000 rounds in only 5 of 30 runs. Without the 125-round floor one run of 30 stopped at 30
rounds all spent at one pair of levels (z 42): a minimum in seconds (--min-cell-s) guards against that.

`plan` turns a finished run's rows into the rounds and seconds each cell needs under a design (batch length,
estimator), from the spreads it recorded; `merge_rows` joins the rows of several device calls into one table.
"""

from __future__ import annotations

import math
import random
import statistics
from collections.abc import Callable, Sequence

TRIM = 0.2
#: rounds before a spread is looked at: fewer cannot show a state that lasts several rounds
MIN_ROUNDS = 30
#: contiguous segments of the batch-means spread
SEGMENTS = 10


def trimmed_mean(values: Sequence[float], trim: float = TRIM) -> float:
    """The mean of the values left after cutting `trim` of them off each end (nan when empty)."""
    if not values:
        return float("nan")
    ordered = sorted(values)
    cut = int(len(ordered) * trim)
    kept = ordered[cut:len(ordered) - cut] or ordered
    return math.fsum(kept) / len(kept)


def block_length(n: int) -> int:
    """Consecutive rounds resampled together: ~sqrt(n) (n^(1/3), the textbook choice, understated the spread
    on levels lasting 5-10 rounds in the simulation of test_recorder_gpu_stats)."""
    return max(1, round(n ** 0.5))


def block_bootstrap_se(values: Sequence[float], stat: Callable[[Sequence[float]], float] = statistics.median,
                       reps: int = 200, seed: int = 0) -> float:
    """Standard error of stat(values) by a moving-block bootstrap over the sequence (inf under MIN_ROUNDS
    values). Seeded, so a recorded run gives the same spread every time it is recomputed."""
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


def segments_se(values: Sequence[float], stat: Callable[[Sequence[float]], float] = statistics.median,
                segments: int = SEGMENTS) -> float:
    """Standard error from `segments` contiguous stretches of the rounds (batch means): the scatter of
    stat over the stretches / sqrt(segments). A state that lasts longer than a bootstrap block still moves
    whole stretches, so this sees it. inf under MIN_ROUNDS values."""
    n = len(values)
    if n < MIN_ROUNDS:
        return float("inf")
    size = n // segments
    per = [stat(values[i * size:(i + 1) * size]) for i in range(segments)]
    return statistics.stdev(per) / math.sqrt(segments)


def spread(values: Sequence[float], stat: Callable[[Sequence[float]], float] = statistics.median) -> float:
    """The spread of stat(values) over rounds in time order: the larger of the block bootstrap's and the
    segments' standard errors. Either alone was too small in a simulated case (A/A, adaptive stop from 125
    rounds, 30 runs each): the bootstrap alone where levels last ~20 rounds (rms z 17.6), the segments alone
    on independent batches (rms z 1.26, one |z| 4.2); the larger of the two: rms z 0.68-0.96 in five cases."""
    return max(block_bootstrap_se(values, stat), segments_se(values, stat))


def round_diffs(base: Sequence[float], other: Sequence[float]) -> list[float]:
    """Per round, other's batch against the same round's base batch, in %."""
    return [(o / b - 1) * 100 for b, o in zip(base, other) if b > 0]


def paired_figure(base: Sequence[float], other: Sequence[float]) -> dict:
    """The cost of other against base: the median of the per-round differences (%) with its `spread` in
    points; beside it the 20%-trimmed mean of the same differences and its spread (the average round; where
    it and the median part by more than twice their spreads, the row says "levels": the recorder may change
    how often a batch sits at the slow level, which the median does not see)."""
    diffs = round_diffs(base, other)
    return {"pct": statistics.median(diffs) if len(diffs) >= 3 else float("nan"), "spread": spread(diffs),
            "tmean_pct": trimmed_mean(diffs), "tmean_spread": spread(diffs, trimmed_mean), "lag1": lag1(diffs),
            "n": len(diffs)}


def levels_apart(fig: dict) -> bool:
    """The median and the trimmed mean of a paired figure disagree beyond twice their spreads combined."""
    gap = abs(fig.get("tmean_pct", fig["pct"]) - fig["pct"])
    return gap > 2 * math.hypot(fig["spread"], fig.get("tmean_spread", 0.0))


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
    """One mode's seconds per call over its batches: the median (us) and its spread (% of it), and the
    20%-trimmed mean (us)."""
    med = statistics.median(values) if values else float("nan")
    return {"median_us": med * 1e6, "spread_pct": 100 * spread(values) / med if med > 0 else float("inf"),
            "tmean_us": trimmed_mean(values) * 1e6, "n": len(values)}


def resolved(samples: dict[str, list[float]], target: float, latency_too: bool = False) -> bool:
    """The stop rule: every paired figure against the base (the recorder's cost, the A/A) has a spread under
    `target` points; with latency_too, each mode's latency too (relative). A constant offset between two
    processes is not spread: it shows as the A/A's value, and more rounds cannot remove it."""
    if any(len(v) < MIN_ROUNDS for v in samples.values()):
        return False
    if any(spread(round_diffs(samples["base"], v)) >= target for m, v in samples.items() if m != "base"):
        return False
    return not latency_too or all(latency_figure(v)["spread_pct"] < target for v in samples.values())


def next_check(rounds: int) -> int:
    """When to look at the spread again: after 15% more rounds (a bootstrap every round would cost more
    than the batches)."""
    return max(rounds + 1, int(rounds * 1.15))


def replay_stop(samples: dict[str, list[float]], target: float, min_rounds: int = MIN_ROUNDS,
                latency_too: bool = False) -> int:
    """The round at which the adaptive rule (`resolved`, looked at after min_rounds rounds, then after every 15%
    more) would have stopped on these recorded rounds; their number when it would not have. How a finished
    run's raw rounds (rounds_us) are replayed to try another target or floor."""
    total = min(len(v) for v in samples.values())
    n = max(min_rounds, MIN_ROUNDS)
    while n <= total:
        if resolved({m: v[:n] for m, v in samples.items()}, target, latency_too):
            return n
        n = next_check(n)
    return total


def rounds_needed(spread_now: float, n: int, target: float, inflation: float = 1.0) -> float:
    """Rounds for a spread seen after n rounds to fall to target (spread ~ 1/sqrt(n)), the seen spread first
    multiplied by `inflation` (how much the run's own spreads understated its A/A)."""
    return n * (spread_now * inflation / target) ** 2


def understatement(rows: list[dict]) -> float:
    """How much a run's paired spreads understated the truth, from its A/A cells (the true cost 0): the rms
    of A/A / spread, at least 1. 2026-12-07b: 1.38 over 29 cells."""
    zs = [p["pct"] / p["spread"] for r in rows if "error" not in r
          for p in [r.get("paired", {}).get("control")] if p and p["spread"] > 0 and p["n"] >= 10]
    return max(1.0, math.sqrt(sum(z * z for z in zs) / len(zs))) if zs else 1.0


def plan(rows: list[dict], target: float, batch_s: float | None, cap_s: float = float("inf"), modes: int = 3,
         min_s: float = 0.0) -> list[dict]:
    """Per recorded cell: rounds and seconds to reach `target` (a) with the recorded design at its stated
    spread and (b) with batches of batch_s (None: each row's own, as a run of this design recorded them) and
    the spread made honest by the layout's own A/A (`understatement`), assuming a batch's scatter does not
    depend on its length (what ~20 ms against ~74 ms batches showed), at least MIN_ROUNDS rounds and min_s
    seconds, capped at cap_s (then the spread expected at the cap). A round has as many batches as the row
    kept modes (`modes` for rows without raw rounds). The time a round spends outside its batches (answers over
    the pipe, warm-up calls, barriers) is the median over the layout's cells of what their seconds show: a
    round of 8 ranks over sockets pays more of it than one of a one-rank group."""
    cells = [r for r in rows if "error" not in r and "recorder" in r.get("paired", {}) and r.get("seconds")]
    overhead, inflation = {}, {}
    for lay in {r.get("layout") for r in cells}:
        mine = [r for r in cells if r.get("layout") == lay]
        extra = [max(0.0, r["seconds"] / r["paired"]["recorder"]["n"] / modes_of(r, modes) - batch_of(r)) for r in mine]
        overhead[lay] = statistics.median(extra)
        inflation[lay] = understatement([r for r in rows if r.get("layout") == lay])
    return [plan_cell(r, target, batch_s, cap_s, modes_of(r, modes), min_s, overhead[r.get("layout")],
                      inflation[r.get("layout")]) for r in cells]


def plan_cell(r: dict, target: float, batch_s: float | None, cap_s: float, modes: int, min_s: float,
              overhead: float, inflation: float) -> dict:
    """One cell of `plan`."""
    n = r["paired"]["recorder"]["n"]
    seen = max(p["spread"] for p in r["paired"].values())
    need_now = rounds_needed(seen, n, target)
    short = batch_s if r.get("bytes") is not None and batch_s is not None else batch_of(r)  # DDP keeps its own
    round_new = modes * (min(short, batch_of(r)) + overhead)
    need_new = max(MIN_ROUNDS, min_s / round_new, rounds_needed(seen, n, target, inflation))
    seconds_new = min(need_new * round_new, cap_s)
    reached = seconds_new / round_new
    return {"layout": r.get("layout"), "what": r["what"], "bytes": r.get("bytes"), "spread": seen, "n": n,
            "inflation": inflation, "batch_ms": batch_of(r) * 1e3, "overhead_ms": overhead * 1e3,
            "rounds_now": need_now, "seconds_now": need_now * r["seconds"] / n,
            "rounds_new": need_new, "seconds_new": seconds_new, "capped": need_new > reached + 0.5,
            "spread_new": target * math.sqrt(need_new / reached)}


def modes_of(row: dict, default: int) -> int:
    """Batches in one of the row's rounds: the modes whose raw rounds it kept (default for older rows)."""
    return len(row["rounds_us"]) if row.get("rounds_us") else default


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
