"""Names the shape of a step-time series the way experienced operators read MFU curves.

Patterns (each with likely causes and the next check):
  flat-low         flat at a fraction of the expected rate from the start (needs --expected)
  periodic-slow    single slow steps at a fixed interval: checkpoint, evaluation, logging
  rare-slow        rare slow steps at random: network, storage or host hiccups
  gc-decline       steps slow down steadily and recover at restart: Python's garbage collector
  throttle-plateau a sustained stretch at ~70% of the normal rate: clock throttling
  noise            high-frequency jitter just under the expected rate: host-side contention (needs --expected)
A healthy series gives no finding. Rates are 1 / step time; "expected" is the step time
the run should reach (from MFU targets or a good earlier run).
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass, field

from parsers.steps.series import StepSeries
from parsers.steps.stats import dominant_period, lag1_autocorrelation, robust_spread, rolling_median, slope


@dataclass
class StepFinding:
    """One pattern of the step times (flat-low, periodic, rare...): its evidence, likely causes and checks."""

    kind: str
    title: str
    evidence: list[str]
    causes: list[str]
    next_checks: list[str]
    confidence: float
    steps: list[int] = field(default_factory=list)


CATALOG: dict[str, tuple[list[str], list[str]]] = {
    "flat-low": (
        ["collectives on a slow path (NCCL over sockets instead of IB/NVLink, IB disabled, wrong NCCL_SOCKET_IFNAME)",
         "a configuration that under-uses the GPUs (micro-batch, parallelism layout, activation "
         "checkpointing everywhere)",
         "input pipeline bound from the start (too few data-loader workers, slow storage)",
         "debug settings left on (CUDA_LAUNCH_BLOCKING, anomaly detection, NCCL_DEBUG_SUBSYS=COLL)",
         "one slow node or GPU holding every step back (power cap, bad link)"],
        ["NCCL init log: 'via NET/Socket' vs 'via NET/IB' / P2P lines; NCCL_IB_DISABLE, NCCL_SOCKET_IFNAME",
         "per-rank step times: is one rank or host consistently slowest?",
         "a short profiler trace: compute vs communication vs data-loader wait"],
    ),
    "periodic-slow": (
        ["checkpoint saving (synchronous torch.save / storage bandwidth)",
         "evaluation or validation every N steps", "logging/metrics flush, or an epoch boundary in the data loader"],
        ["compare the period with checkpoint_interval / eval_interval / log_interval in the config",
         "use asynchronous checkpointing (torch.distributed.checkpoint async_save) or a faster tier",
         "py-spy dump during one of those steps (forensics.arm() with a slow-step trigger catches it)"],
    ),
    "rare-slow": (
        ["network hiccups (IB link flaps, retransmits, congestion from other jobs)",
         "storage stalls in the input pipeline",
         "host interference: preemption, OS jitter, another process on the node",
         "a transient GPU event (ECC, throttling for a moment)"],
        ["match the slow steps' times with NCCL WARN lines, dmesg and IB port counters",
         "per-rank times for those steps: is it always the same rank or host?",
         "arm forensics (slow-step trigger) to catch the stacks of the next one"],
    ),
    "gc-decline": (
        ["Python's cyclic garbage collector: each full collection walks a growing object graph, at different "
         "moments on each rank",
         "objects that pile up across steps (metric histories, cached graphs, tensors kept in lists)",
         "allocator fragmentation growing with time"],
        ["forensics.arm(gc=N): automatic GC off and gc.collect() every N steps on every rank at once (gc.freeze() "
         "after setup helps)",
         "gc.callbacks to time collections; gc.get_count() and len(gc.get_objects()) over time",
         "py-spy dumps of slow steps showing time in gc / object traversal"],
    ),
    "throttle-plateau": (
        ["GPU clock throttling: thermal or power limits (a hot or power-capped GPU slows every rank it syncs with)",
         "a degraded link (NVLink/PCIe running at lower width or speed) for that stretch",
         "host CPU frequency scaling"],
        ["nvidia-smi -q -d PERFORMANCE,CLOCK,TEMPERATURE,POWER (clocks throttle reasons) on every node for that time",
         "DCGM clock-throttle and temperature fields over the run",
         "per-rank step times: the rank that slows first is on the throttled GPU"],
    ),
    "noise": (
        ["CPU contention on the host (data-loader workers, logging threads competing with the training thread)",
         "kernel-launch bound steps (many small kernels: Python overhead shows as jitter)",
         "OS jitter and unpinned threads; shared network with other jobs"],
        ["CPU affinity / numactl binding, fewer threads per process (OMP_NUM_THREADS)",
         "profiler: GPU idle gaps between kernels mean launch-bound (CUDA graphs, torch.compile)",
         "compare step-time jitter across ranks: uniform jitter is host-side, one noisy rank is its node"],
    ),
}


NOISY = 0.04  #: coefficient of variation above which a series is jittery rather than flat
#: slow steps at random are a pattern from this many on: one or two hiccups in a run are what every
#: healthy host shows (a page-cache miss, a log flush; the healthy 4-rank capture in
#: tests/fixtures/straggler/healthy has one step at 2.7x the median in 146), not a cause to chase
MIN_RARE = 3


@dataclass
class Settings:
    expected: float | None = None  #: target step time, seconds
    warmup: int = 3  #: leading steps ignored (compilation, caches)
    spike: float = 1.5  #: a slow step is above this x the median (and 5 robust sigmas)


def classify(series: StepSeries, settings: Settings | None = None) -> list[StepFinding]:
    """Findings for the series, strongest first; empty when it looks healthy."""
    settings = settings or Settings()
    warm = min(settings.warmup, max(0, len(series.seconds) - 10))
    x = series.seconds[warm:]
    restarts = [r - warm for r in series.restarts if r - warm > 0]
    if len(x) < 10:
        return []
    base = statistics.median(x)
    spread = max(robust_spread(x, base), 0.01 * base)
    spikes = [i for i, v in enumerate(x) if v > settings.spike * base and v > base + 5 * spread]
    calm = [v for i, v in enumerate(x) if i not in set(spikes)]
    findings: list[StepFinding] = []
    for check in (_gc_decline, _plateau, _spikes, _flat_low, _noise):
        found = check(x, base, spread, spikes, calm, restarts, settings, warm)
        if found and found.kind == "rare-slow" and any(f.kind == "gc-decline" for f in findings):
            continue  # irregular growing pauses are the collector's, already explained
        if found:
            findings.append(found)
    return sorted(findings, key=lambda f: -f.confidence)


def _make(kind: str, title: str, evidence: list[str], confidence: float, steps: list[int] | None = None) -> StepFinding:
    causes, checks = CATALOG[kind]
    return StepFinding(kind, title, evidence, causes, checks, round(confidence, 2), steps or [])


def _segments(n: int, restarts: list[int]) -> list[tuple[int, int]]:
    bounds = [0, *sorted(set(r for r in restarts if 0 < r < n)), n]
    return [(a, b) for a, b in zip(bounds, bounds[1:]) if b - a >= 5]


def _gc_decline(x, base, spread, spikes, calm, restarts, settings, warm):
    """Within each run the amortised step time rises, or the pauses grow; a restart resets it.

    Python's full collections walk every tracked object, so as a run keeps more objects
    each pause is longer: seen per step as growing spikes, and averaged over logging
    windows (what an MFU curve shows) as a slow decline of the rate.
    """
    spike_set = set(spikes)
    runs = []
    for a, b in _segments(len(x), restarts):
        if b - a < 10:
            continue
        seg = x[a:b]
        width = max(5, len(seg) // 10)
        windows = [statistics.mean(seg[i : i + width]) for i in range(0, len(seg) - width + 1, width)]
        rise = slope(windows) * len(windows) / windows[0] if len(windows) >= 3 else 0.0
        pauses = [x[i] for i in range(a, b) if i in spike_set]
        big = [v for v in pauses if v > 3 * base]  # a busy host adds small random spikes: judge the real pauses
        pauses = big if len(big) >= 4 else pauses
        growth = 0.0
        if len(pauses) >= 4:
            half = len(pauses) // 2
            growth = statistics.median(pauses[half:]) / statistics.median(pauses[:half]) - 1
        runs.append((a, b, rise, growth, windows[0], windows[-1]))
    slowing = [r for r in runs if r[2] >= 0.08 or r[3] >= 0.25]
    if not slowing or len(slowing) * 2 < len(runs):  # most runs must slow down
        return None
    evidence = []
    for k, (a, b, rise, growth, w0, w1) in enumerate(runs):
        parts = []
        if rise >= 0.08:
            parts.append(f"windowed mean step time rises {rise:+.0%} over the run (first window {w0:.3g} s, "
                         f"last {w1:.3g} s)")
        if growth >= 0.25:
            parts.append(f"pauses grow {growth:+.0%} from the first half of the run to the second")
        line = f"run {k + 1} (steps {a + warm}-{b - 1 + warm}): " + ("; ".join(parts) or "no clear slowdown")
        evidence.append(line)
    resets = [(p, c) for p, c in zip(runs, runs[1:]) if c[4] < p[5] or (p[3] > 0 and c[3] >= 0)]
    if len(runs) > 1 and resets:
        evidence.append(f"{len(runs) - 1} restart(s): each run starts fast again")
        confidence = 0.85
    else:
        evidence.append("no restart in the series to confirm a reset; a steady slowdown alone may also be memory "
                        "growth or fragmentation")
        confidence = 0.55
    return _make("gc-decline", "steps slow down within each run and recover at restart (garbage-collector signature)",
                 evidence, confidence)


def _plateau(x, base, spread, spikes, calm, restarts, settings, warm):
    """A sustained stretch at ~57-80% of the run's normal rate (step time 1.25-1.75x)."""
    n = len(x)
    window = max(5, n // 50)
    level = rolling_median(x, window)
    min_len = max(10, n // 20)
    runs, start = [], None
    for i, v in enumerate(level + [0.0]):
        inside = i < n and 1.25 <= v / base <= 1.75
        if inside and start is None:
            start = i
        elif not inside and start is not None:
            if i - start >= min_len:
                runs.append((start, i))
            start = None
    if not runs:
        return None
    covered = sum(b - a for a, b in runs)
    if covered > 0.6 * n:
        return None  # that is the run's normal level, not a plateau
    ratios = [base / statistics.median(x[a:b]) for a, b in runs]
    evidence = [f"steps {a + warm}-{b - 1 + warm}: rate {r:.0%} of the normal level ({statistics.median(x[a:b]):.3g} s "
                f"vs {base:.3g} s)" for (a, b), r in zip(runs, ratios)]
    near70 = all(0.6 <= r <= 0.8 for r in ratios)
    return _make("throttle-plateau", "sustained plateau at ~70% of the normal rate (clock-throttling signature)",
                 evidence, 0.8 if near70 else 0.6,
                 [a + warm for a, _ in runs])


def _spikes(x, base, spread, spikes, calm, restarts, settings, warm):
    """Isolated slow steps: periodic (checkpoint/eval) or rare and random."""
    if not spikes:
        return None
    isolated = [i for i in spikes if (i - 1) not in spikes and (i + 1) not in spikes]
    if len(isolated) < max(1, len(spikes) // 2):
        return None  # runs of slow steps are plateaus or trends, not single events
    steps = [i + warm for i in spikes]
    worst = max(x[i] for i in spikes) / base
    period, on = _best_period(x, base, spikes)
    if period and period[1] >= 0.7:
        p = period[0]
        steps = [i + warm for i in on]
        phase = statistics.mode([s % p for s in steps])
        evidence = [f"{len(on)} slow steps, every {p} steps (at step % {p} == {phase}); up to {worst:.1f}x the "
                    f"median {base:.3g} s",
                    f"slow steps: {', '.join(map(str, steps[:12]))}{' ...' if len(steps) > 12 else ''}"]
        evidence.append("if forensics.arm(gc=N) runs here with N = this period, these are its scheduled collections")
        return _make("periodic-slow", f"a slow step every {p} steps (checkpoint / evaluation signature)", evidence,
                     0.6 + 0.3 * period[1], steps)
    share = len(spikes) / len(x)
    if share > 0.05 or len(spikes) < MIN_RARE:
        return None
    evidence = [f"{len(spikes)} slow step(s) in {len(x)} ({share:.1%}), at no regular interval; up to {worst:.1f}x the "
                f"median {base:.3g} s",
                f"slow steps: {', '.join(map(str, steps[:12]))}{' ...' if len(steps) > 12 else ''}"]
    return _make("rare-slow", "rare slow steps at random", evidence, 0.7, steps)


def _best_period(x: list[float], base: float, spikes: list[int]) -> tuple[tuple[int, float] | None, list[int]]:
    """The most regular lattice among all slow steps, or among only the big ones.

    On a busy host many steps run 1.5-3x slow at random; a checkpoint or a collection
    costs far more. Looking at the big ones alone keeps such noise from hiding a period.
    """
    worst = max(x[i] for i in spikes)
    candidates = [spikes, [i for i in spikes if x[i] > 3 * base], [i for i in spikes if x[i] > 0.3 * worst]]
    best: tuple[tuple[int, float] | None, list[int]] = (None, spikes)
    for events in candidates:
        found = dominant_period(events) if len(events) >= 3 else None
        if found and (best[0] is None or found[1] > best[0][1]):
            best = (found, events)
    return best


def _flat_low(x, base, spread, spikes, calm, restarts, settings, warm):
    """Whole run flat, at a clear fraction of the expected rate."""
    if not settings.expected:
        return None
    rate = settings.expected / base
    head = statistics.median(x[: max(5, len(x) // 10)])
    jitter = statistics.pstdev(calm) / statistics.mean(calm) if len(calm) > 1 else 0.0
    if rate >= 0.9 or abs(head - base) > 0.1 * base or jitter >= NOISY:
        return None  # not low, not low from the start, or not flat (then it is noise)
    evidence = [f"median step {base:.3g} s vs expected {settings.expected:.3g} s: {rate:.0%} of the expected rate, "
                f"already in the first steps"]
    if 0.6 <= rate <= 0.8:
        evidence.append("~70% from the start: also check clock throttling on every GPU")
    return _make("flat-low", f"flat at {rate:.0%} of the expected rate from the start", evidence, 0.8)


def _noise(x, base, spread, spikes, calm, restarts, settings, warm):
    """Step-to-step jitter (low autocorrelation), with the typical step a little slower than it could be."""
    if len(calm) < 20 or not settings.expected:
        return None  # "under the expected rate" needs one: jitter alone is what every shared host shows
    cv = statistics.pstdev(calm) / statistics.mean(calm)
    ac = lag1_autocorrelation(calm)
    if cv < NOISY or ac > 0.3:
        return None
    best = sorted(calm)[max(0, len(calm) // 20)]  # 5th percentile: what the hardware can do
    reference = settings.expected or best
    rate = reference / statistics.mean(calm)
    evidence = [f"step times jitter by {cv:.0%} (coefficient of variation) with no memory from one step to the next "
                f"(lag-1 autocorrelation {ac:.2f})",
                f"mean rate {rate:.0%} of {'the expected' if settings.expected else 'the best steps'} "
                f"({reference:.3g} s)"]
    return _make("noise", "high-frequency noise just under the expected rate", evidence,
                 0.65 if 0.8 <= rate < 1.0 else 0.5)
