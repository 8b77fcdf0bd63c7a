"""Slow, not hung: the rank (or host) that arrives last at collectives, how often and by how much.

Why: in a collective every rank waits for the last one to arrive, so a rank that is slow
before the collective (a slow GPU, a slow data step, a throttled CPU) arrives last, op
after op, while the others' waits grow. Two measures, by what the source stamps:

- wait (preferred): a rank's own wait in one op, complete - enter, both on its own clock.
  All ranks of an op complete together, so the rank that arrived last waits least; its
  lateness is the op's median wait minus its own. Clock offsets between hosts cancel, and so
  do the steady few-ms offsets with which ranks notice the previous op's end (measured on the
  H200 machine: healthy ranks' enter times differ steadily by up to 3 ms, their waits by
  under 0.5 ms). Needs enter and completion stamps: the NCCL recorder.
- enter: enter time - the op's median enter time. Any source with enter stamps: the
  recorder, Flight Recorder `time_created_ns`, timestamped NCCL `COLL` log lines. Hosts'
  clocks must agree (NTP: about 1 ms), and the offsets above read as lateness: they count
  as noise, and two or three ranks' enter times name nobody (MIN_ENTER_RANKS).

Decision rules (issue 26: by the job's own noise, no fixed floor). Per op, each rank's
lateness is its arrival less the op's median arrival. A rank is named when
- its mean lateness (TRIM cut at each end: one-off slow ops, GC pauses) exceeds the other
  ranks' by JITTERS (2.5 for waits, 3 for enter times) times the job's jitter: the op-by-op
  spread of the lateness of the ranks not consistently late (a trimmed standard deviation,
  less the clock's rounding: Sheppard's correction), for enter times combined with the spread
  of the other ranks' steady offsets on the late side (steady_spread_ms); on a coarse clock
  (CLOCK_REALTIME_COARSE, 1-4 ms ticks) by half a tick at least, since a steady rounding phase fakes up to a tick;
- and it is consistently late: later than the op's median, or last, at more ops than chance
  gives (sign test; binomial on its share of ops last, ties shared), p x 2 x ranks <= ALPHA.
  Lateness below a tick shows only here and in the mean of the ticks.
All late ranks on one host that has two or more ranks: a slow host; one late rank: a
straggler; most ranks late: the job's pace (a job-wide slowdown shows as long steps, not here).

Measured (benchmarks/README.md, benchmarks/straggler_detect.py --healthy): real H200 captures, 0
false alarms in 32 judgements of rounds with no slow rank (recorder and COLL log), the 5 ms
straggler named in every round from the recorder; simulated healthy jobs (2-64 ranks, normal to
heavy-tailed jitter, one-off slow ops, GC pauses): false alarms 0/1632 from ns waits, 1/1632 from
4 ms-clock waits, 0.9-2.6% from enter times (all where steady offsets are 3-10x a 0.3 ms jitter);
a straggler 3x the jitter named at 100% from the recorder's waits over 30 ops or more.
"""

from __future__ import annotations

import bisect
import math
import statistics
from dataclasses import dataclass, field
from typing import Any

from parsers.judges.recorder import recorder_hosts
from parsers.model.findings import ReasonClass, Suspect, cite
from parsers.model.ranges import fold

#: the recorder's clock resolution when it used the coarse clock (CLOCK_REALTIME_COARSE, seen 4 ms)
CLOCK_RESOLUTION_MS = 4.0
#: resolution of nanosecond stamps (recorder with precise op times, Flight Recorder)
FINE_RESOLUTION_MS = 0.001
#: fewest common operations to judge on (whether that many are enough is the sign test's to say)
MIN_OPS = 8
#: fewest ranks to name anyone from enter times: a rank's steady offset (its host's clock, when it notices
#: an op's end) reads as lateness there, and is told from it only against other ranks' offsets (three or more)
MIN_ENTER_RANKS = 4
#: how many times the job's own jitter a rank's mean lateness must exceed the others' to be named, by measure:
#: waits carry only op-by-op jitter, estimated well, so 2.5 names a rank 3x late over 30 ops or more (83-100%
#: in benchmarks/straggler_detect.py --healthy, no false alarm); enter times also carry ranks' steady offsets,
#: told from lateness only by the others' spread: 3
JITTERS = {"wait": 2.5, "enter": 3.0}
#: the sign test's bar, over all ranks at once (Bonferroni): p x ranks at most this
ALPHA = 1e-3
#: share of values cut at each end for the trimmed mean and the trimmed standard deviation
TRIM = 0.1
#: the standard deviation of a normal's central 80% (TRIM cut at each end), in units of its sigma
TRIMMED_SD = 0.6616
#: standard errors of a median per-op excess that noise is allowed (noise_margin_ms: judges.links' slow links)
NOISE_SE = 6.0
#: a rank late by at most this share of the latest rank's lateness is not named with it: once the
#: straggler arrives, its ring neighbours finish at slightly different times (on the H200, rank 1 waited
#: 2.0 ms less than the others next to rank 2's 28 ms), an echo of the one straggler, not a second one
ECHO_SHARE = 0.25

#: (communicator, function, seq) -> {global rank: (enter ns, completion ns or None)}
OpTimes = dict[tuple[str, str, int], dict[int, tuple[int, int | None]]]


@dataclass(frozen=True)
class TimedOps:
    """One source's stamps of the same operations at several ranks."""

    source: str  #: what stamped them, as the verdict cites it
    times: OpTimes
    resolution_ms: float  #: the clock's tick: what rounding adds to the jitter, and half of it the least lateness named


@dataclass
class Stragglers:
    """What the stamps show."""

    ops: int = 0  #: operations stamped at every recorded rank of their communicator
    lateness_ms: dict[int, float] = field(default_factory=dict)  #: rank -> median lateness after the op's median
    mean_ms: dict[int, float] = field(default_factory=dict)  #: rank -> mean lateness (TRIM cut at each end): judged on
    last_share: dict[int, float] = field(default_factory=dict)  #: rank -> share of ops it arrived at last
    late: list[int] = field(default_factory=list)
    hosts: dict[int, str] = field(default_factory=dict)
    slow_host: str | None = None
    threshold_ms: float = 0.0  #: JITTERS[measure] x the job's jitter: the lateness a rank needs to be named
    source: str = ""
    measure: str = "enter"  #: 'wait' (own wait, complete - enter) or 'enter' (enter times across ranks)
    jitter_ms: float = 0.0  #: the job's jitter: op-by-op spread of the lateness of the ranks not consistently late
    later_share: dict[int, float] = field(default_factory=dict)  #: rank -> share of ops it is later than the median
    resolution_ms: float = FINE_RESOLUTION_MS  #: the source clock's tick
    #: rank -> p that it is this often late by chance (sign or last)
    sign_p: dict[int, float] = field(default_factory=dict)
    _ordered: list[float] = field(default_factory=list, repr=False, compare=False)  #: mean_ms's values, sorted

    def describe(self) -> str:
        if self.ops < MIN_OPS:
            return f"too few common operations ({self.ops}) to judge who arrives last"
        if not self.late and self.measure == "enter" and len(self.mean_ms) < MIN_ENTER_RANKS:
            return (f"no straggler named: from the enter times of {len(self.mean_ms)} ranks a steady offset (a host's "
                    f"clock, when a rank notices an op's end) and a lateness read the same ({self.basis})")
        if not self.late:
            spread = max(self.mean_ms.values()) - min(self.mean_ms.values()) if self.mean_ms else 0.0
            return (f"no straggler: over {self.ops} collectives no rank arrives consistently later than the others by "
                    f"{JITTERS[self.measure]:g}x the job's jitter ({_ms(self.jitter_ms)}) or more (spread of mean "
                    f"lateness {_ms(spread)}, {self.basis})")
        share = sum(self.last_share.get(r, 0.0) for r in self.late)
        lag = statistics.median(self.excess_ms(r) for r in self.late)
        jitter = self.jitter_ms
        noise = (f"the job's jitter {_ms(jitter)}, {lag / jitter:.0f}x" if jitter >= 0.05 else
                 f"the job's jitter below the clock's {self.resolution_ms:g} ms tick")
        who = (f"host {self.slow_host} (ranks {fold(self.late)})" if self.slow_host
               else f"rank{'s' if len(self.late) > 1 else ''} {fold(self.late)}"
               + (f" ({self.hosts[self.late[0]]})" if len(self.late) == 1 and self.late[0] in self.hosts else ""))
        verb = "arrives" if len(self.late) == 1 or self.slow_host else "arrive"
        return (f"{who} {verb} last at {share:.0%} of {self.ops} collectives, {_ms(lag)} after the others on average "
                f"({noise}; {self.basis})")

    def excess_ms(self, rank: int) -> float:
        """How much later than the other ranks `rank` arrives on average (its mean lateness less their median)."""
        if rank not in self.mean_ms:
            return 0.0
        if len(self._ordered) != len(self.mean_ms):  # sorted once: to_dict asks for every rank of large jobs
            self._ordered = sorted(self.mean_ms.values())
        return self.mean_ms[rank] - _median_without(self._ordered, self.mean_ms[rank])

    @property
    def basis(self) -> str:
        how = "own wait in each op" if self.measure == "wait" else "enter times"
        return f"{self.source}, {how}" if self.source else how

    def to_dict(self) -> dict[str, Any]:
        return {"ops": self.ops, "late": self.late, "slow_host": self.slow_host,
                "threshold_ms": round(self.threshold_ms, 3), "jitter_ms": round(self.jitter_ms, 3),
                "source": self.source, "measure": self.measure,
                "lateness_ms": {str(k): round(v, 2) for k, v in sorted(self.lateness_ms.items())},
                "mean_ms": {str(k): round(v, 2) for k, v in sorted(self.mean_ms.items())},
                "excess_ms": {str(k): round(self.excess_ms(k), 2) for k in sorted(self.mean_ms)},
                "last_share": {str(k): round(v, 3) for k, v in sorted(self.last_share.items())},
                "later_share": {str(k): round(v, 3) for k, v in sorted(self.later_share.items())},
                "sign_p": {str(k): float(f"{v:.2g}") for k, v in sorted(self.sign_p.items())},
                "text": self.describe()}


def _ms(value: float) -> str:
    return f"{value:.0f} ms" if value >= 10 else f"{value:.1f} ms"


def recorder_ops(recorder_states: list) -> TimedOps:
    """The recorder's collectives: enter (`start_ns`) and inferred completion per rank."""
    out: OpTimes = {}
    precise = bool(recorder_states)
    for st in recorder_states:
        precise = precise and st.precise_op_times
        rank = st.job_rank
        for c in st.colls:
            if c.kind == "coll" and c.start_ns:
                out.setdefault((st.comm_hex, c.func, c.seq), {})[rank] = (c.start_ns, c.complete_ns or None)
    return TimedOps("NCCL recorder", out, FINE_RESOLUTION_MS if precise else CLOCK_RESOLUTION_MS)


def fr_ops(artifacts: list) -> TimedOps:
    """Flight Recorder dumps taken mid-run: each entry's `time_created_ns` per rank (enter only).

    Why: a job without the recorder still has the Flight Recorder; its entries are stamped
    when the rank enqueues the collective (nanoseconds). Its completion is only 'discovered'
    by the watchdog's polling, too coarse for waits."""
    out: OpTimes = {}
    for art in artifacts:
        if art.kind != "fr-dump" or not art.parsed:
            continue
        for e in art.parsed.events:
            t = getattr(e, "time_ns", None)
            if t and e.seq_kind == "seq" and e.origin.rank is not None:
                out.setdefault((e.comm, e.op, e.seq), {})[e.origin.rank] = (t, None)
    return TimedOps("Flight Recorder", out, FINE_RESOLUTION_MS)


def nccl_log_ops(artifacts: list) -> TimedOps:
    """Timestamped NCCL `COLL` lines (NCCL_DEBUG_SUBSYS=COLL, NCCL_DEBUG_TIMESTAMP_LEVELS=INFO): the
    line is written when the rank enqueues the op, keyed by communicator and opCount (enter only).

    The stamp's precision is what NCCL_DEBUG_TIMESTAMP_FORMAT asked for; it is read from the
    stamps themselves (whole seconds, milliseconds, or finer)."""
    out: OpTimes = {}
    stamps: list[int] = []
    for art in artifacts:
        if art.kind != "nccl-log" or not art.parsed or art.rank is None:
            continue
        for e in art.parsed.events:
            if getattr(e, "seq_kind", "") != "opCount":
                continue
            t = e.time_ns
            if not t:
                break  # NCCL stamps every line of a log or none (NCCL_DEBUG_TIMESTAMP_LEVELS): none here
            if not e.comm.startswith("ptr:"):
                rank = e.origin.rank if e.origin.rank is not None else art.rank
                out.setdefault((e.comm, e.op, e.seq), {})[rank] = (t, None)
                stamps.append(t)
    return TimedOps("NCCL COLL log", out, _resolution_ms(stamps))


def _resolution_ms(stamps: list[int]) -> float:
    """The finest unit every stamp is a whole multiple of: what the printed format keeps."""
    for unit_ns in (1_000_000_000, 1_000_000, 1_000):
        if stamps and all(t % unit_ns == 0 for t in stamps[:4096]):
            return unit_ns / 1e6
    return FINE_RESOLUTION_MS


def judge_stragglers(recorder_states: list) -> Stragglers:
    """Who arrives last, from the recorder (see the module doc for the rules)."""
    hosts = recorder_hosts(recorder_states)
    return judge_ops(recorder_ops(recorder_states), hosts)


#: (communicator or series, function, seq) -> {rank: enter ns}: sources with enter stamps only
EnterTimes = dict[tuple[str, str, int], dict[int, int]]


def judge_enter_times(times: EnterTimes, hosts: dict[int, str], resolution_ms: float = FINE_RESOLUTION_MS,
                      source: str = "") -> Stragglers:
    """judge_ops for a source that stamps only when each rank arrives (arm()'s step series, tests)."""
    ops: OpTimes = {key: {r: (t, None) for r, t in per.items()} for key, per in times.items()}
    return judge_ops(TimedOps(source, ops, resolution_ms), hosts)


def judge_ops(timed: TimedOps, hosts: dict[int, str]) -> Stragglers:
    """Who arrives last at collectives, from one source's stamps (the rules in the module doc)."""
    ranks_of_comm: dict[str, set[int]] = {}
    for (comm, _f, _s), per in timed.times.items():
        ranks_of_comm.setdefault(comm, set()).update(per)
    full = [per for (comm, _f, _s), per in timed.times.items() if len(per) >= 2 and set(per) == ranks_of_comm[comm]]
    waited = [per for per in full if all(done for _enter, done in per.values())]
    measure = "wait" if len(waited) >= MIN_OPS else "enter"
    ops = waited if measure == "wait" else full
    out = Stragglers(ops=len(ops), hosts=dict(hosts), source=timed.source, measure=measure,
                     resolution_ms=timed.resolution_ms)
    if out.ops < MIN_OPS:
        return out
    late_ms, last = _lateness(ops, measure)
    out.lateness_ms = {r: statistics.median(v) for r, v in late_ms.items()}
    out.mean_ms = {r: trimmed_mean(v) for r, v in late_ms.items()}
    out.last_share = {r: last.get(r, 0.0) / len(ops) for r in late_ms}
    ranks = len(late_ms)
    for r, v in late_ms.items():
        out.later_share[r] = sum(1 for x in v if x > 0) / len(v)
        out.sign_p[r] = min(sign_test_p(v), last_test_p(last.get(r, 0.0), len(ops), ranks))
    excess = {r: out.excess_ms(r) for r in out.mean_ms}
    consistent = {r for r in late_ms if excess[r] > 0 and out.sign_p[r] * 2 * ranks <= ALPHA}
    if measure == "enter" and ranks < MIN_ENTER_RANKS:
        consistent = set()  # two or three ranks' enter times: an offset and a lateness read the same
    # the job's jitter from the ranks that are not consistently late (a slow host's other rank is not noise)
    calm = {r: v for r, v in late_ms.items() if r not in consistent} or late_ms
    within = job_jitter_ms(calm, _quantisation_var(timed.resolution_ms, measure))

    def jitter_for(rank: int) -> float:
        """The noise `rank` must stand out from: the op-by-op jitter, and for enter times the others' steady offsets."""
        return math.hypot(within, steady_spread_ms(out.mean_ms, rank)) if measure == "enter" else within

    # on a coarse clock at least half a tick: a steady rounding phase fakes up to a tick in the mean
    floor = timed.resolution_ms / 2 if timed.resolution_ms > FINE_RESOLUTION_MS else 0.0
    out.jitter_ms = jitter_for(max(excess, key=lambda r: excess[r]))
    out.threshold_ms = max(JITTERS[measure] * out.jitter_ms, floor)
    named = {r: excess[r] for r in consistent if excess[r] >= max(JITTERS[measure] * jitter_for(r), floor)}
    out.late = sorted(named)
    if out.late:  # the straggler's echo: a neighbour by ECHO_SHARE of its lateness or less is not a second one
        top = max(named.values())
        out.late = [r for r in out.late if named[r] > ECHO_SHARE * top]
    if len(out.late) > len(out.lateness_ms) // 2:
        out.late = []  # most ranks 'late': that is the job's pace, not a straggler
    out.slow_host = _slow_host(out.late, out.hosts)
    return out


def steady_spread_ms(mean_ms: dict[int, float], rank: int) -> float:
    """How far the other ranks' steady lateness spreads on the late side, as a standard deviation.

    Why the late side only: enter stamps cannot tell a rank's steady offset (its host's clock, when it
    notices an op's end) from lateness, so a healthy rank steadily a little late is the noise a
    straggler must stand out from. The early side is not: a straggler makes ranks early (on the H200
    the ranks after a 30 ms straggler entered steadily 4-19 ms early, ring order), and a
    two-sided spread would let the straggler hide itself. 1.4826 x the median of the late side's
    deviations from the median (of |deviation| of a symmetric spread: a normal's sigma)."""
    others = sorted(m for r, m in mean_ms.items() if r != rank)
    if len(others) < 2:
        return 0.0
    mid = statistics.median(others)
    late_side = [m - mid for m in others[(len(others) + 1) // 2:]]  # the upper half by position: ties count
    return 1.4826 * statistics.median(late_side)


def _median_without(ordered: list[float], value: float) -> float:
    """The median of `ordered` (sorted) less one occurrence of `value`: the others' median, without a sort per rank."""
    n = len(ordered) - 1
    if n < 1:
        return 0.0
    gone = bisect.bisect_left(ordered, value)

    def at(j: int) -> float:
        return ordered[j] if j < gone else ordered[j + 1]

    return at(n // 2) if n % 2 else (at(n // 2 - 1) + at(n // 2)) / 2


def _lateness(ops: list[dict[int, tuple[int, int | None]]],
              measure: str) -> tuple[dict[int, list[float]], dict[int, float]]:
    """Per rank, its lateness in each op (arrival less the op's median, ms), and in how many ops it was last
    (a tie on a coarse clock: each tied rank is last for its share of the op)."""
    late_ms: dict[int, list[float]] = {}
    last: dict[int, float] = {}
    for per in ops:
        arrival = _arrival_ms(per, measure)
        mid = statistics.median(arrival.values())
        for r, t in arrival.items():
            late_ms.setdefault(r, []).append(t - mid)
        latest = max(arrival.values())
        tied = [r for r, t in arrival.items() if t == latest]
        for r in tied:
            last[r] = last.get(r, 0.0) + 1 / len(tied)
    return late_ms, last


def trimmed_mean(values: list[float]) -> float:
    """The mean of the central values, TRIM of them cut at each end.

    Why a mean and not the median: on a coarse clock (4 ms ticks) a 1.5 ms lateness is 0 or 1
    tick op by op, the median 0 or 4 ms; the mean of the ticks recovers the 1.5 ms (the jitter
    dithers the rounding). Why trimmed: a one-off slow op or a GC pause on one rank moves a
    plain mean by its size over the number of ops; trimmed it moves nothing."""
    xs = sorted(values)
    cut = int(len(xs) * TRIM)
    mid = xs[cut:len(xs) - cut] or xs
    return sum(mid) / len(mid)


def job_jitter_ms(late_ms: dict[int, list[float]], quant_var: float = 0.0) -> float:
    """The job's own jitter in one rank's lateness, as a standard deviation, from the ranks given (the others).

    How much each rank's lateness varies op by op: the deviations of every rank's lateness from
    its own trimmed mean, pooled, TRIM cut at each end (one-off slow ops, GC pauses), their
    standard deviation scaled to a normal's; less what the clock's rounding adds (Sheppard's
    correction: `quant_var`). Why not the median absolute deviation: on a coarse clock most
    deviations are exactly 0 and a MAD says 0 whatever the jitter. Steady offsets between ranks
    (when each notices an op's end, hosts' clocks) are not jitter: they do not vary op by op."""
    centre = {r: trimmed_mean(v) for r, v in late_ms.items() if v}
    dev = sorted(x - centre[r] for r, v in late_ms.items() for x in v)
    if not dev:
        return 0.0
    cut = int(len(dev) * TRIM)
    mid = dev[cut:len(dev) - cut] or dev
    mean = sum(mid) / len(mid)
    var = sum((x - mean) ** 2 for x in mid) / len(mid) / TRIMMED_SD ** 2
    return max(0.0, var - quant_var) ** 0.5


def last_test_p(last: float, ops: int, ranks: int) -> float:
    """One-sided binomial test: the chance that a rank no later than the others arrives last at this many
    ops or more, each op's last being any of `ranks` alike (ties on a coarse clock count shared)."""
    k = int(last)
    if ops > 1000:  # the normal approximation (continuity-corrected)
        mean, sd = ops / ranks, (ops * (1 / ranks) * (1 - 1 / ranks)) ** 0.5
        return 0.5 * math.erfc((k - 0.5 - mean) / sd / 2 ** 0.5)
    p = 1 / ranks
    return sum(math.comb(ops, j) * p ** j * (1 - p) ** (ops - j) for j in range(k, ops + 1))


def sign_test_p(values: list[float]) -> float:
    """One-sided sign test: the chance that a rank no later than the others is later than the op's
    median at this many ops or more (ops where it is exactly at the median do not count)."""
    above = sum(1 for x in values if x > 0)
    n = above + sum(1 for x in values if x < 0)
    if n == 0:
        return 1.0
    if n > 1000:  # the normal approximation (continuity-corrected): exact sums of n-digit integers get slow
        return 0.5 * math.erfc((above - 0.5 - n / 2) / (0.5 * n ** 0.5) / 2 ** 0.5)
    return sum(math.comb(n, k) for k in range(above, n + 1)) / 2 ** n


def _quantisation_var(tick_ms: float, measure: str) -> float:
    """What rounding to the clock's tick adds to the variance of one lateness: tick^2/12 per stamp, two
    stamps for an enter lateness (its own and the op's median), four for a wait's (two waits)."""
    if tick_ms <= FINE_RESOLUTION_MS:
        return 0.0
    return (4 if measure == "wait" else 2) * tick_ms * tick_ms / 12


def noise_margin_ms(late_ms: dict, tick_ms: float) -> float:
    """NOISE_SE standard errors of a median per-op excess (a link's send wait in judges.links; stragglers
    have their own test, judge_ops), per key of `late_ms`: what jitter alone can reach.

    Why: with few ops and a jittery job, the largest of several ranks' medians strays past
    a fixed floor. The per-op spread is each rank's median absolute deviation (robust to the
    straggler's own ops), pooled over ranks, plus the quantisation on a coarse clock: lateness is
    the difference of two waits, each the difference of two stamps, so four uniform rounding errors
    (variance 4 * tick^2/12); the median of n values has a standard error of ~1.25 sigma/sqrt(n)."""
    mads = [statistics.median(abs(x - m) for x in v) for v in late_ms.values() if v
            for m in (statistics.median(v),)]
    if not mads:
        return 0.0
    n = min(len(v) for v in late_ms.values())
    sigma = 1.4826 * statistics.median(mads)
    quant = tick_ms * tick_ms / 3 if tick_ms > FINE_RESOLUTION_MS else 0.0
    return NOISE_SE * 1.2533 * (sigma * sigma + quant) ** 0.5 / max(1, n) ** 0.5


def _arrival_ms(per: dict[int, tuple[int, int | None]], measure: str) -> dict[int, float]:
    """Each rank's arrival in one op, in ms on a common scale: minus its own wait, or its enter time."""
    if measure == "wait":
        return {r: -((done or enter) - enter) / 1e6 for r, (enter, done) in per.items()}
    first = min(enter for enter, _ in per.values())
    return {r: (enter - first) / 1e6 for r, (enter, _done) in per.items()}


def _slow_host(late: list[int], hosts: dict[int, str]) -> str | None:
    """The host whose every rank is late, when it has two or more ranks and no other rank is late."""
    if len(late) < 2:
        return None
    names = {hosts.get(r) for r in late}
    if len(names) != 1 or None in names:
        return None
    host = names.pop()
    on_host = [r for r, h in hosts.items() if h == host]
    return host if sorted(on_host) == sorted(late) else None


def straggler_suspects(result: Stragglers, pids: dict[int, int] | None = None) -> list[Suspect]:
    """Suspects for the late ranks: a slow host or a straggler rank, confidence from how consistent it is."""
    out = []
    for r in result.late:
        share = result.last_share.get(r, 0.0)
        group = result.slow_host is not None
        cls = ReasonClass.SLOW_HOST if group else ReasonClass.STRAGGLER
        share_group = sum(result.last_share.get(x, 0.0) for x in result.late) if group else share
        conf = round(min(0.9, 0.4 + 0.5 * share_group), 3)
        reason = (f"is on host {result.slow_host}, whose ranks {fold(result.late)} arrive last at {share_group:.0%} "
                  f"of {result.ops} collectives" if group
                  else f"arrives last at {share:.0%} of {result.ops} collectives")
        jitter = result.jitter_ms
        reason += (f", {_ms(result.excess_ms(r))} after the others on average (median {_ms(result.lateness_ms[r])}; "
                   + (f"the job's jitter {_ms(jitter)})" if jitter >= 0.05 else
                      f"the job's jitter below the clock's {result.resolution_ms:g} ms tick)"))
        out.append(Suspect(rank=r, host=result.hosts.get(r), pid=(pids or {}).get(r), reason_class=cls, reason=reason,
                           confidence=conf,
                           evidence=[cite(result.describe(), tool="time stamps")]))
    return out
