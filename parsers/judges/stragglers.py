"""Slow, not hung: the rank (or host) that enters collectives last, how often and by how much.

Why enter times: in a collective every rank waits for the last one to arrive, so a rank
that is slow before the collective (a slow GPU, a slow data step, a throttled CPU)
arrives last, op after op, while the others' waits grow. The NCCL recorder stamps each
operation when the rank enters it (`start_ns`, per communicator and sequence number);
comparing those stamps across ranks for the same operation gives each rank's lateness.

Decision rules (docs/commands/analyze.md):
- lateness of a rank in one op = its enter time - the median enter time of that op;
- a rank is late when its median lateness exceeds the job's median by LATE_MS and by
  three times the clock's resolution (the recorder's clock is coarse: 4 ms seen on the
  H200 machine), so a few milliseconds of noise never name anyone;
- all late ranks on one host that has two or more ranks: a slow host; one late rank: a
  straggler; no late rank: no straggler (a job-wide slowdown shows as long steps, not here).
Stamps from different hosts are only comparable when their clocks agree; NTP keeps them
within about a millisecond, which is below the thresholds here.
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass, field
from typing import Any

from parsers.model.findings import ReasonClass, Suspect
from parsers.ranges import fold

#: smallest lateness (ms) ever named, however fine the clock
LATE_MS = 8.0
#: the recorder's clock resolution when it cannot be told (CLOCK_REALTIME_COARSE, seen 4 ms)
CLOCK_RESOLUTION_MS = 4.0
#: fewest common operations to judge on
MIN_OPS = 8


@dataclass
class Stragglers:
    """What the enter times show."""

    ops: int = 0  #: operations entered by every recorded rank of their communicator
    lateness_ms: dict[int, float] = field(default_factory=dict)  #: rank -> median lateness
    last_share: dict[int, float] = field(default_factory=dict)  #: rank -> share of ops it entered last
    late: list[int] = field(default_factory=list)
    hosts: dict[int, str] = field(default_factory=dict)
    slow_host: str | None = None
    threshold_ms: float = 0.0

    def describe(self) -> str:
        if self.ops < MIN_OPS:
            return f"too few common operations ({self.ops}) to judge who enters last"
        if not self.late:
            spread = max(self.lateness_ms.values()) - min(self.lateness_ms.values()) if self.lateness_ms else 0.0
            return (f"no straggler: over {self.ops} collectives no rank enters later than the others by more than "
                    f"{self.threshold_ms:.0f} ms (spread of median lateness {spread:.0f} ms)")
        share = sum(self.last_share.get(r, 0.0) for r in self.late)
        lag = statistics.median(self.lateness_ms[r] for r in self.late)
        who = (f"host {self.slow_host} (ranks {fold(self.late)})" if self.slow_host
               else f"rank{'s' if len(self.late) > 1 else ''} {fold(self.late)}"
               + (f" ({self.hosts[self.late[0]]})" if len(self.late) == 1 and self.late[0] in self.hosts else ""))
        return (f"{who} enter{'s' if len(self.late) == 1 or self.slow_host else ''} {share:.0%} of {self.ops} collectives "
                f"last, median {lag:.0f} ms after the others")

    def to_dict(self) -> dict[str, Any]:
        return {"ops": self.ops, "late": self.late, "slow_host": self.slow_host, "threshold_ms": self.threshold_ms,
                "lateness_ms": {str(k): round(v, 1) for k, v in sorted(self.lateness_ms.items())},
                "last_share": {str(k): round(v, 3) for k, v in sorted(self.last_share.items())},
                "text": self.describe()}


EnterTimes = dict[tuple[str, str, int], dict[int, int]]


def enter_times(recorder_states: list) -> EnterTimes:
    """(communicator, function, seq) -> {global rank: enter time ns}, from the recorder's collectives."""
    out: EnterTimes = {}
    for st in recorder_states:
        rank = st.env_rank if st.env_rank is not None else st.rank
        for c in st.colls:
            if c.kind == "coll" and c.start_ns:
                out.setdefault((st.comm_hex, c.func, c.seq), {})[rank] = c.start_ns
    return out


def fr_enter_times(artifacts: list) -> EnterTimes:
    """The same from Flight Recorder dumps taken mid-run: each entry's time_created_ns per rank.

    Why a second source: a job without the recorder still has the Flight Recorder; its
    entries are stamped when the rank enqueues the collective (nanoseconds)."""
    out: EnterTimes = {}
    for art in artifacts:
        if art.kind != "fr-dump" or not art.parsed:
            continue
        for e in art.parsed.events:
            t = getattr(e, "time_ns", None)
            if t and e.seq_kind == "seq" and e.origin.rank is not None:
                out.setdefault((e.comm, e.op, e.seq), {})[e.origin.rank] = t
    return out


def judge_stragglers(recorder_states: list, resolution_ms: float = CLOCK_RESOLUTION_MS) -> Stragglers:
    """Who enters collectives last, from the recorder (see the module doc for the rules)."""
    hosts = {(st.env_rank if st.env_rank is not None else st.rank): (st.host or st.hostid) for st in recorder_states}
    return judge_enter_times(enter_times(recorder_states), hosts, resolution_ms)


def judge_slowness(ev: Any) -> Stragglers:
    """Stragglers of a running job (`ev`: parsers.evidence.Evidence): the recorder's enter times, else (or when
    they cover too few operations) the Flight Recorder's, whose nanosecond stamps need no clock margin."""
    found = judge_stragglers(ev.recorder)
    if found.ops >= MIN_OPS:
        return found
    hosts = {a.rank: a.hints.host or a.host for a in ev.artifacts if a.rank is not None}
    from_fr = judge_enter_times(fr_enter_times(ev.artifacts), hosts, resolution_ms=0.001)
    return from_fr if from_fr.ops > found.ops else found


def judge_enter_times(times: EnterTimes, hosts: dict[int, str], resolution_ms: float = CLOCK_RESOLUTION_MS) -> Stragglers:
    """Who enters collectives last, from enter times of any source (the rules in the module doc)."""
    ranks_of_comm: dict[str, set[int]] = {}
    for (comm, _f, _s), per in times.items():
        ranks_of_comm.setdefault(comm, set()).update(per)
    full = [per for (comm, _f, _s), per in times.items() if len(per) >= 2 and set(per) == ranks_of_comm[comm]]
    out = Stragglers(ops=len(full))
    out.hosts = dict(hosts)
    if out.ops < MIN_OPS:
        return out
    late_ms: dict[int, list[float]] = {}
    last: dict[int, int] = {}
    for per in full:
        mid = statistics.median(per.values())
        for r, t in per.items():
            late_ms.setdefault(r, []).append((t - mid) / 1e6)
        latest = max(per, key=lambda r: per[r])
        last[latest] = last.get(latest, 0) + 1
    out.lateness_ms = {r: statistics.median(v) for r, v in late_ms.items()}
    out.last_share = {r: last.get(r, 0) / len(full) for r in late_ms}
    base = statistics.median(out.lateness_ms.values())
    out.threshold_ms = max(LATE_MS, 3 * resolution_ms)
    out.late = sorted(r for r, v in out.lateness_ms.items() if v - base >= out.threshold_ms)
    if len(out.late) > len(out.lateness_ms) // 2:
        out.late = []  # most ranks 'late': that is the job's pace, not a straggler
    out.slow_host = _slow_host(out.late, out.hosts)
    return out


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
        reason = (f"is on host {result.slow_host}, whose ranks {fold(result.late)} enter {share_group:.0%} of "
                  f"collectives last" if group else f"enters {share:.0%} of {result.ops} collectives last")
        reason += f", median {result.lateness_ms[r]:.0f} ms after the others"
        out.append(Suspect(rank=r, host=result.hosts.get(r), pid=(pids or {}).get(r), reason_class=cls, reason=reason,
                           confidence=conf,
                           evidence=[f"NCCL recorder enter times over {result.ops} collectives: {result.describe()}"]))
    return out
