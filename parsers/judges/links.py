"""Slow, not hung, on the wire: the link (sender -> receiver) whose data takes longest on the network.

Why a judge of its own: a slow link does not make any rank arrive late. Every rank enters
each collective on time and the whole op slows, because a ring or tree is as fast as its
slowest hop. Who arrives last (judges.stragglers) sees a job-wide slowdown. What differs is
*where the time goes*: the recorder times, per proxy send op, how long its steps stayed in
SendWait: the data handed to the network, completion not yet seen. A sender waiting for its GPU
or for its peer's buffer is in another state, so upstream slowness does not count; only the hop
itself (its NIC, cable, switch port, or a receiver that does not drain its socket) does.

What is timed: current recorder files give per op the union of its steps' SendWait intervals
(`ProxyOpRecord.send_wait_union_us`: time with at least one step on the network); files written
until 2026-12-07 give the sum of the steps' times (`send_wait_us`), in which steps on the network
together each count, so it is the union times about the number of steps in flight. A job's files
are judged on one measure: the union where any file has it (the files of the other measure are left
out, since a sum beside a union would be read as a slow link). Files with the flag SEND_WAIT_SAMPLED
(`RecorderState.send_wait_every` N > 1, the recorder's default 4) time one in N of an op's spans that hold
one step (steps one after another), and count each untimed one as the mean of the op's timed ones; spans of
two steps or more are always timed. The union is then an estimate (within -1.6% to +4.9% of the harness's
truth over 40 spans of 50 us) in which one span stretched by a preemption counts N times or not at all:
the rules below read each link's median over MIN_OPS ops or more, so such a span moves one op, not the link.

Rules: per collective (communicator, function, seq), each link's send wait summed over
channels, minus the op's median over links; a link is slow when its median excess over
MIN_OPS or more ops reaches LINK_SLOW_MS, LINK_SLOW_SHARE of the median link's wait and
NOISE_SE standard errors of the job's own jitter (stragglers.noise_margin_ms), and when at
most half of the links are (most links slow alike is the network's pace, not one link). Slow links
that all leave one rank, and are all of its links: that rank's sends (its NIC or host). All
entering one rank: sends into it. Otherwise each slow link is named.

Why the thresholds hold for the union as they did for the sum: LINK_SLOW_SHARE and the noise margin
are relative to the job's own waits, so they scale with the measure. LINK_SLOW_MS (absolute) was set
on sums. Ops of one step (the H200 Tree run, h200_run7 slowtree: every op of the four paced links)
have union = sum, so nothing moves. Ops of many steps (h200_links, 28 steps an op): a healthy link's
sum was 1.6-1.8 ms an op and channel and links differed by at most 0.26 ms of a 3.35 ms median (8%);
links alike overlap alike, so their unions, each at most its sum, differ by a like share of a smaller
median: well under 1 ms. The paced link (4 ns a byte of 1.75 MB an op) summed 28 ms more than the
median; its union is at least the 7 ms its data is paced on the wire, against healthy unions of at
most their 1.8 ms sums: still over 5 ms more, above every threshold. What the floor loses is a link
slower by under 1 ms of real time an op, which the sum inflated to several. Those device fixtures are
sums, read as sums: their outcomes are unchanged (tests/parsers/pipeline/test_h200_issue14_15.py);
a device run of the union recorder is what confirms the healthy spread (not yet made).
"""

from __future__ import annotations

import dataclasses
import statistics
from dataclasses import dataclass, field
from typing import Any

from parsers.judges.recorder import comm_rank_table, recorder_hosts
from parsers.judges.stragglers import FINE_RESOLUTION_MS, MIN_OPS, noise_margin_ms
from parsers.model.findings import ReasonClass, Suspect, cite
from parsers.model.ranges import fold
from parsers.readers.recorder import FLAG_SEND_WAIT, FLAG_SEND_WAIT_UNION, RecorderState

#: smallest excess (ms an op) named: healthy links' send waits differed by under 0.7 ms on the H200
LINK_SLOW_MS = 1.0
#: smallest excess as a share of the median link's wait: with every link slowed alike (25 ms an op
#: on the H200), links still differed by up to 10%; a link a quarter slower than the rest stands out
LINK_SLOW_SHARE = 0.25

#: (sender job rank, receiver job rank)
Link = tuple[int, int]
#: (communicator, function, seq) -> {link: ms its sends spent on the network in that op}
LinkWaits = dict[tuple, dict[Link, float]]
#: functions whose seq is each rank's own count (judged by who waits on whom, not here)
POINT_TO_POINT = ("Send", "Recv")


@dataclass
class SlowLinks:
    """What the recorder's send waits show."""

    ops: int = 0  #: operations with send waits of three or more links
    timed: bool = False  #: some recorder file times send waits (RECORDER_FLAG_SEND_WAIT or _UNION)
    measure: str = ""  #: "union" (time with a step on the network) or "sum" (old files: steps' times added)
    wait_ms: dict[Link, float] = field(default_factory=dict)  #: link -> median send wait per op
    excess_ms: dict[Link, float] = field(default_factory=dict)  #: link -> median excess over the op's median link
    slowest_share: dict[Link, float] = field(default_factory=dict)  #: link -> share of ops where it was slowest
    slow: list[Link] = field(default_factory=list)
    threshold_ms: float = 0.0
    hosts: dict[int, str] = field(default_factory=dict)
    sender: int | None = None  #: every slow link leaves this rank and they are all its links
    receiver: int | None = None  #: every slow link enters this rank and they are all its links

    def describe(self) -> str:
        if not self.timed:
            return "no send-wait times (the recorder of this NCCL run predates them, or recorded no network send)"
        if self.ops < MIN_OPS or not self.wait_ms:
            return f"too few operations timed on three or more links ({self.ops}) to judge a slow link"
        if not self.slow:
            typical = statistics.median(self.wait_ms.values())
            return (f"no slow link: over {self.ops} collectives no link's data spends {self.threshold_ms:.1f} ms more "
                    f"on the network than the others' (median {typical:.1f} ms an op on each of {len(self.wait_ms)} "
                    "links)")
        return f"{self.where()} (recorder send waits over {self.ops} collectives)"

    def where(self) -> str:
        """The slow part, in one phrase, with how much slower."""
        lag = statistics.median(self.excess_ms[link] for link in self.slow)
        typical = statistics.median(self.wait_ms.values())
        more = f"{lag:.1f} ms more per op on the network than the median link ({typical:.1f} ms)"
        if self.sender is not None:
            peers = fold([dst for _src, dst in self.slow])
            return (f"sends out of {self.who(self.sender)} are slow: to rank{'s' if len(self.slow) > 1 else ''} "
                    f"{peers}, {more}")
        if self.receiver is not None:
            peers = fold([src for src, _dst in self.slow])
            return (f"sends into {self.who(self.receiver)} are slow: from rank{'s' if len(self.slow) > 1 else ''} "
                    f"{peers}, {more}")
        links = ", ".join(f"{self.who(s)} -> {self.who(d)}" for s, d in self.slow)
        return f"slow link{'s' if len(self.slow) > 1 else ''} {links}: {more}"

    def who(self, rank: int) -> str:
        return f"rank {rank} ({self.hosts[rank]})" if self.hosts.get(rank) else f"rank {rank}"

    def to_dict(self) -> dict[str, Any]:
        key = lambda link: f"{link[0]}->{link[1]}"  # noqa: E731 - one format for every table below
        return {"ops": self.ops, "timed": self.timed, "measure": self.measure, "slow": [key(x) for x in self.slow],
                "sender": self.sender,
                "receiver": self.receiver, "threshold_ms": round(self.threshold_ms, 3),
                "wait_ms": {key(k): round(v, 3) for k, v in sorted(self.wait_ms.items())},
                "excess_ms": {key(k): round(v, 3) for k, v in sorted(self.excess_ms.items())},
                "slowest_share": {key(k): round(v, 3) for k, v in sorted(self.slowest_share.items())},
                "text": self.describe()}


def send_waits(states: list[RecorderState]) -> tuple[LinkWaits, bool]:
    """(communicator, function, seq) -> {link: ms its sends spent in SendWait, summed over channels}, and
    whether any file times send waits. Links are in job ranks (comm ranks mapped through the files).
    One measure per job (module doc): the union where any file has it, else the old sum."""
    table = comm_rank_table(states)
    out: LinkWaits = {}
    timed = False
    newest = _newest_per_rank(states)
    measure = send_wait_measure(newest)
    for st in newest:
        if _measure_of(st) != measure:
            continue  # no send waits, or the other measure: not comparable with this job's
        ranks = table.get(st.comm_hex, {})
        me = ranks.get(st.rank, st.job_rank)
        for op in st.proxy_ops:
            us = op.send_wait_union_us if measure == "union" else op.send_wait_us
            if us is None:
                continue  # a receive
            timed = True
            if op.status != "done" or op.coll_seq is None or op.pid != st.pid or op.peer == st.rank:
                continue  # in flight, of no known op, posted for another process (PXN), or a self-loop
            if op.func in POINT_TO_POINT:
                continue  # a Send's seq counts that rank's own sends: not the same op at another rank
            # no RANK in any file of this communicator (mp.spawn): its ranks are the job's, as job_rank says
            peer = ranks.get(op.peer) if ranks else op.peer
            if peer is None:
                continue  # the peer's file is not here: its rank in the job is unknown
            per = out.setdefault((st.comm_id, op.func, op.coll_seq), {})
            per[(me, peer)] = per.get((me, peer), 0.0) + us / 1000.0
    return out, timed


def send_wait_measure(states: list[RecorderState]) -> str:
    """The measure a job's send waits are judged on: "union" where any file has it, "sum" where only old
    files time them, "" where none does."""
    kinds = {_measure_of(st) for st in states}
    return "union" if "union" in kinds else "sum" if "sum" in kinds else ""


def _measure_of(st: RecorderState) -> str:
    """What a file's send-wait field means, by its header flags."""
    if st.flags & FLAG_SEND_WAIT_UNION:
        return "union"
    return "sum" if st.flags & FLAG_SEND_WAIT else ""


def judge_links(states: list[RecorderState]) -> SlowLinks:
    """The slow link of a running job, from the recorder's send waits (rules in the module doc)."""
    waits, timed = send_waits(states)
    hosts = recorder_hosts(states)
    out = judge_link_waits(waits, hosts, timed)
    out.measure = send_wait_measure(_newest_per_rank(states))
    return out


def judge_link_waits(waits: LinkWaits, hosts: dict[int, str], timed: bool = True) -> SlowLinks:
    """The rules of the module doc over one table of per-op link waits (the recorder's, or a benchmark's)."""
    out = SlowLinks(timed=timed, hosts=dict(hosts))
    ops = [per for per in waits.values() if len(per) >= 3]
    out.ops = len(ops)
    if out.ops < MIN_OPS:
        return out
    excess: dict[Link, list[float]] = {}
    raw: dict[Link, list[float]] = {}
    slowest: dict[Link, int] = {}
    for per in ops:
        mid = statistics.median(per.values())
        for link, ms in per.items():
            excess.setdefault(link, []).append(ms - mid)
            raw.setdefault(link, []).append(ms)
        top = max(per, key=lambda link: per[link])
        slowest[top] = slowest.get(top, 0) + 1
    counted = {link: v for link, v in excess.items() if len(v) >= MIN_OPS}
    out.excess_ms = {link: statistics.median(v) for link, v in counted.items()}
    out.wait_ms = {link: statistics.median(raw[link]) for link in counted}
    out.slowest_share = {link: slowest.get(link, 0) / len(ops) for link in counted}
    if not counted:
        return out
    typical = statistics.median(out.wait_ms.values())
    out.threshold_ms = max(LINK_SLOW_MS, LINK_SLOW_SHARE * typical, noise_margin_ms(counted, FINE_RESOLUTION_MS))
    out.slow = sorted(link for link, v in out.excess_ms.items() if v >= out.threshold_ms)
    if len(out.slow) > len(counted) // 2:
        out.slow = []  # most links slow alike: the network's pace, not one link
    out.sender, out.receiver = _shared_end(out.slow, list(counted))
    return out


def without(result: SlowLinks, drop: set[Link]) -> SlowLinks:
    """The same finding less some slow links (another judge explained them), its shared end recomputed."""
    out = dataclasses.replace(result, slow=[link for link in result.slow if link not in drop])
    out.sender, out.receiver = _shared_end(out.slow, list(out.excess_ms))
    return out


def _shared_end(slow: list[Link], links: list[Link]) -> tuple[int | None, int | None]:
    """The rank every slow link leaves (or enters), when they are all of that rank's links and more than one."""
    if len(slow) < 2:
        return None, None
    senders, receivers = {s for s, _ in slow}, {d for _, d in slow}
    if len(senders) == 1:
        src = senders.pop()
        if sorted(x for x in links if x[0] == src) == slow:
            return src, None
    if len(receivers) == 1:
        dst = receivers.pop()
        if sorted(x for x in links if x[1] == dst) == slow:
            return None, dst
    return None, None


def link_suspects(result: SlowLinks, pids: dict[int, int] | None = None) -> list[Suspect]:
    """One suspect per slow part: the sending rank of a slow link (or of slow sends), the receiving
    rank of slow sends into it; confidence from how often its link was the op's slowest."""
    if not result.slow:
        return []
    if result.receiver is not None:
        ranks = {result.receiver: result.slow}
    else:
        ranks = {}
        for link in result.slow:
            ranks.setdefault(link[0], []).append(link)
    out = []
    for rank, links in sorted(ranks.items()):
        share = max(result.slowest_share.get(link, 0.0) for link in links)
        out.append(Suspect(rank=rank, host=result.hosts.get(rank), pid=(pids or {}).get(rank),
                           reason_class=ReasonClass.SLOW_LINK, reason=result.where(),
                           confidence=round(min(0.85, 0.35 + 0.5 * share), 3),
                           evidence=[cite(result.describe(), tool="recorder")]))
    return out


def _newest_per_rank(states: list[RecorderState]) -> list[RecorderState]:
    """One file per (communicator, rank): the one that saw the most proxy ops (copies read twice)."""
    best: dict[tuple[int, int], RecorderState] = {}
    for st in states:
        key = (st.comm_id, st.rank)
        if key not in best or st.proxy_next > best[key].proxy_next:
            best[key] = st
    return list(best.values())
