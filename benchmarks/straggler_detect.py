"""Benchmark: straggler detection against slowdown size, number of collectives and source, and
the false-alarm rate on healthy jobs (issue 26).

Why simulated stamps: the H200 runs (tests/fixtures/device) give one point per case; this
sweeps the judge (parsers.judges.stragglers.judge_ops) over slowdowns and sample counts with
the noise those runs showed. Model of one op: every rank enters after the previous op's end
plus its work (jitter σ 1.5 ms) plus, for the slow rank, the slowdown; all complete when the
last arrives. Each rank also notices the previous end with a steady offset of up to ±3 ms
(seen on the H200: 8 processes sharing one GPU), which shifts its enter *and* completion
stamps. Sources: the recorder's own waits (ns clock, or the 4 ms coarse clock of older
writers), and enter times (Flight Recorder ns stamps, NCCL COLL log µs stamps). Each cell:
share of trials that named the slow rank (detection), or any rank for 0 ms (false alarms;
goal 0).

Slow links (parsers.judges.links.judge_link_waits), a ring of 8 links: each link's send wait
per op is the job's typical wait (3.3 ms healthy, 26 ms with every link slowed alike: both
measured on the H200, tests/fixtures/device/h200_links) times a steady per-link offset of up
to ±10% and a per-op jitter of 5%, plus the excess of the one slow link. Detection: only that
link named; false alarms: any link named at 0 ms.

Healthy jobs (`--healthy`): no slow rank, many seeds, world sizes 2 to 64, 30 to 240 ops, per-op
jitter drawn from a normal, a Laplace, a Student t with 3 degrees of freedom (heavy tails) and a
log-normal (a right tail), each with steady per-rank offsets of up to ±3 ms (and, for enter times,
±1 ms: the H200 ns run's healthy ranks entered within ±0.7 ms of each other on average), one-off slow ops
(1% of a rank's ops, 20-200 ms) and GC pauses (3% of a rank's ops, 10-60 ms); every source above.
False alarm: anyone named. Detection at `k` x jitter: the slow rank, and only it, named when it
is late by k times the per-op jitter's standard deviation.

    PYTHONPATH=. python benchmarks/straggler_detect.py [--trials 50] [--healthy]
"""

from __future__ import annotations

import argparse
import random

from parsers.judges.links import judge_link_waits
import math

from parsers.judges.stragglers import CLOCK_RESOLUTION_MS, FINE_RESOLUTION_MS, TimedOps, judge_ops

RANKS, SLOW = 8, 5
SOURCES = (  # label, with completion stamps (own waits), clock tick in ms
    ("recorder waits, ns clock", True, FINE_RESOLUTION_MS),
    ("recorder waits, 4 ms coarse clock", True, CLOCK_RESOLUTION_MS),
    ("enter times, ns/us stamps (Flight Recorder, NCCL COLL log)", False, FINE_RESOLUTION_MS),
)


def trial(rng: random.Random, slow_ms: float, ops: int, waits: bool, tick: float, jitter_ms: float) -> list[int]:
    offset = {r: rng.uniform(-3.0, 3.0) for r in range(RANKS)}

    def stamp(ms: float) -> int:
        return int(tick * int(ms / tick) * 1e6)

    times, t = {}, 1000.0
    for q in range(ops):
        enter = {r: t + 50.0 + rng.gauss(0, jitter_ms) + (slow_ms if r == SLOW else 0.0) for r in range(RANKS)}
        t = max(enter.values()) + 0.5
        times[("0xc0ffee", "AllReduce", q)] = {
            r: (stamp(e + offset[r]), stamp(t + offset[r] + rng.gauss(0, 0.2)) if waits else None)
            for r, e in enter.items()}
    return judge_ops(TimedOps("simulated", times, tick), {r: f"node{r:02d}" for r in range(RANKS)}).late


def draw(rng: random.Random, kind: str) -> float:
    """One op's jitter with standard deviation 1 (before scaling), of the named distribution."""
    if kind == "normal":
        return rng.gauss(0, 1)
    if kind == "laplace":
        return rng.choice((-1, 1)) * rng.expovariate(1) / math.sqrt(2)
    if kind == "student-t3":  # heavy tails: variance 3, scaled to 1
        return rng.gauss(0, 1) / math.sqrt(rng.gammavariate(1.5, 2) / 3) / math.sqrt(3)
    z = rng.gauss(0, 0.8)  # log-normal, centred, standard deviation 1
    return (math.exp(z) - math.exp(0.32)) / math.sqrt((math.exp(0.64) - 1) * math.exp(0.64))


def job_trial(rng: random.Random, ranks: int, ops: int, kind: str, jitter_ms: float, waits: bool, tick: float,
              slow_ms: float = 0.0, upsets: bool = True, offset_ms: float = 3.0) -> list[int]:
    """One job of `ranks` ranks over `ops` ops (rank 1 `slow_ms` late), each rank's stamps steadily off by up
    to `offset_ms` either way: who the judge names."""
    offset = {r: rng.uniform(-offset_ms, offset_ms) for r in range(ranks)}

    def stamp(ms: float) -> int:
        return int(tick * math.floor(ms / tick) * 1e6)

    times, t = {}, 1000.0
    for q in range(ops):
        enter = {}
        for r in range(ranks):
            e = t + 50.0 + jitter_ms * draw(rng, kind) + (slow_ms if r == 1 else 0.0)
            if upsets and rng.random() < 0.01:
                e += rng.uniform(20, 200)  # a one-off slow op
            if upsets and rng.random() < 0.03:
                e += rng.uniform(10, 60)  # a GC pause
            enter[r] = e
        t = max(enter.values()) + 0.5
        times[("0xc0ffee", "AllReduce", q)] = {
            r: (stamp(e + offset[r]), stamp(t + offset[r] + rng.gauss(0, 0.2)) if waits else None)
            for r, e in enter.items()}
    return judge_ops(TimedOps("simulated", times, tick), {r: f"node{r:02d}" for r in range(ranks)}).late


def healthy_sweep(trials: int, rng: random.Random) -> None:
    """False alarms on healthy jobs, and detection of a straggler at k x jitter, per source and distribution."""
    kinds = ("normal", "laplace", "student-t3", "lognormal")
    for label, waits, tick in SOURCES:
        for offset in ((1.0, 3.0) if not waits else (3.0,)):
            print(f"{label}, steady offsets up to ±{offset:g} ms:")
            print(f"  {'jitter':<11}{'false alarms (jobs)':>22}"
                  + "".join(f"{f'detect {k:g}x, 30/60/120 ops':>34}" for k in (3, 4)))
            for kind in kinds:
                alarms = jobs = 0
                for ranks in (2, 4, 8, 16, 64):
                    for ops in (30, 60, 120, 240):
                        for _ in range(max(1, trials // (4 if ranks == 64 else 1))):
                            jitter = rng.choice((0.3, 1.5, 5.0))
                            jobs += 1
                            alarms += bool(job_trial(rng, ranks, ops, kind, jitter, waits, tick, offset_ms=offset))
                cells = []
                for k in (3, 4):
                    got = []
                    for ops in (30, 60, 120):
                        named = [job_trial(rng, 8, ops, kind, 1.5, waits, tick, slow_ms=k * 1.5, offset_ms=offset)
                                 for _ in range(trials)]
                        got.append(f"{sum(n == [1] for n in named) / trials:.0%}")
                    cells.append(" / ".join(got))
                rate = f"{alarms}/{jobs} = {alarms / jobs:.2%}"
                print(f"  {kind:<11}{rate:>22}" + "".join(f"{c:>34}" for c in cells))


def link_trial(rng: random.Random, typical_ms: float, excess_ms: float, ops: int) -> list[tuple[int, int]]:
    links = [(r, (r + 1) % RANKS) for r in range(RANKS)]
    steady = {link: rng.uniform(-0.1, 0.1) for link in links}
    waits = {("0xc0ffee", "AllReduce", q): {link: typical_ms * (1 + steady[link]) + rng.gauss(0, 0.05 * typical_ms)
                                            + (excess_ms if link == (SLOW, SLOW + 1) else 0.0) for link in links}
             for q in range(ops)}
    return judge_link_waits(waits, {r: f"node{r:02d}" for r in range(RANKS)}).slow


def table(sizes: tuple, trials: int, run, want: list) -> None:
    """One row per op count: the share of trials that named exactly `want` (at size 0: anything, a false alarm)."""
    print("  ops  " + "".join(f"{s:>8g} ms" for s in sizes))
    for ops in (8, 16, 32, 64):
        cells = []
        for size in sizes:
            named = [run(size, ops) for _ in range(trials)]
            hits = sum(bool(n) if size == 0 else n == want for n in named)
            cells.append(f"{hits / trials:>11.0%}")
        print(f"  {ops:>3}" + "".join(cells))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--trials", type=int, default=50)
    ap.add_argument("--jitter-ms", type=float, default=1.5)
    ap.add_argument("--healthy", action="store_true", help="only the false-alarm and 3x/4x detection sweep")
    args = ap.parse_args()
    rng = random.Random(15)
    if args.healthy:
        healthy_sweep(args.trials, rng)
        return 0
    print("goal: 0% false alarms at 0 ms in every cell; detection of 5 ms and more from the recorder")
    for label, waits, tick in SOURCES:
        print(f"{label}: detection of the slow rank (false alarms at 0 ms), {args.trials} trials per cell")
        table((0, 2, 5, 10, 15, 30, 300), args.trials,
              lambda slow, ops, w=waits, t=tick: trial(rng, slow, ops, w, t, args.jitter_ms), [SLOW])
    print("goal: 0% false alarms at 0 ms; a slow link found when its excess is a quarter or more of the typical wait")
    for typical in (3.3, 26.0):
        print(f"slow link, typical link wait {typical:g} ms an op: detection of the slow link (false alarms at 0 ms), "
              f"{args.trials} trials per cell")
        table((0, 0.5, 1, 2, 5, 10, 30), args.trials,
              lambda excess, ops, t=typical: link_trial(rng, t, excess, ops), [(SLOW, SLOW + 1)])
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
