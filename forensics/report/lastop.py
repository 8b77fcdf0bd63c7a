"""Per-rank 'last operation reached': where each rank stopped, in program order.

From stacks (what a bundle always has) a rank's last operation is the collective
its main thread waits in, or the user frame it runs when it is in none. Stacks
carry no clock, so positions are ordered by program order where it can be read:
where two ranks' stacks part inside the same function, the lower line number was
reached first (in the loop iteration both are in). Ranks with no stack or no
process cannot be placed and come first, as 'not placed'.

Log and recorder events (sequence numbers per collective) order positions exactly:
where the logs judge gives each rank's last operation (parsers.judges.logs.lastops, one
communicator for all), `add_events` merges it into the stack entries, and a logs-only
post-mortem (no stack at all) gets its entries from it alone (`entries_from_ops`); the chart
then uses the sequence number instead of the stack order.
"""

from __future__ import annotations

from parsers.stacks.labels import short_label

import functools
import re
from collections import Counter
from dataclasses import asdict, dataclass
from typing import Any, Iterable

from parsers.model import Verdict

_LABEL = re.compile(r"^(?P<func>.*) \((?P<file>.*):(?P<line>\d+)\)$")
NOT_PLACED = "not placed"


@dataclass
class TimelineEntry:
    """Where one rank stopped."""

    rank: int
    host: str | None
    state: str | None
    activity: str  #: 'collective', 'gpu-sync', 'elsewhere', 'unknown', 'missing'
    op: str | None  #: collective it waits in, if any
    where: str | None  #: innermost user frame
    station: str  #: short label of the position, shared by ranks that stopped at the same place
    order: int  #: position index in program order; 0 is 'not placed'
    suspect: bool = False
    culprit: bool = False
    reason_class: str | None = None  #: the verdict's kind of suspicion, for suspects
    reason: str | None = None  #: the verdict's sentence, for suspects
    seq: int | None = None  #: last collective sequence number, from events when known
    last_event: str | None = None  #: that event, as text
    source: str = "stacks"

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def timeline_from_verdict(verdict: Verdict) -> list[TimelineEntry]:
    """Entries for every rank in the verdict's ranks table, ordered by rank."""
    rows = [r for r in verdict.sections.get("ranks") or [] if r.get("rank") is not None]
    paths = rank_paths(verdict.sections.get("stack_tree") or {})
    suspects = {}
    for s in reversed(verdict.suspects):  # most likely last, so it wins
        if s.rank is not None:
            suspects[s.rank] = s
    culprit = verdict.culprit.rank if verdict.culprit else None
    stations: dict[str, list[str]] = {}
    entries = []
    for row in rows:
        rank = int(row["rank"])
        station = station_label(row)
        if station != NOT_PLACED:
            stations.setdefault(station, paths.get(rank, []))
        entries.append(
            TimelineEntry(
                rank=rank, host=row.get("host"), state=row.get("state"), activity=row.get("activity") or "unknown",
                op=row.get("op"), where=row.get("where"), station=station, order=0,
                suspect=rank in suspects, culprit=rank == culprit,
                reason_class=suspects[rank].reason_class if rank in suspects else None,
                reason=suspects[rank].reason if rank in suspects else None,
            )
        )
    order = order_stations(stations)
    for e in entries:
        e.order = order.get(e.station, 0)
    return entries


def station_label(row: dict[str, Any]) -> str:
    """'all_reduce in train_step (job.py:52)', 'slow_data_loader (job.py:47)' or 'not placed'."""
    kind = row.get("activity")
    where = _short(row.get("where"))
    if kind in ("collective", "gpu-sync") and row.get("op"):
        return f"{row['op']} in {where}" if where else str(row["op"])
    if kind == "elsewhere" and where:
        return where
    return NOT_PLACED


def normalise_frame(label: str) -> str:
    """The shared short form of a frame label (parsers.stacks.labels.short_label): addresses that
    differ per process (ASLR) and C++ template arguments must not split ranks that stand in one place."""
    return short_label(label)


def rank_paths(tree: dict[str, Any]) -> dict[int, list[str]]:
    """rank -> frame labels outermost first (addresses normalised), read back from a stack prefix tree dict."""
    paths: dict[int, list[str]] = {}

    def walk(node: dict[str, Any], prefix: list[str]) -> None:
        for child in node.get("children") or []:
            path = prefix + [normalise_frame(str(child.get("frame")))]
            for rank in child.get("ranks") or []:
                paths[int(rank)] = path
            walk(child, path)

    walk(tree, [])
    return paths


def order_stations(stations: dict[str, list[str]]) -> dict[str, int]:
    """station -> 1-based index in program order (see module docstring)."""
    names = sorted(stations, key=lambda s: (len(stations[s]), s))
    names.sort(key=functools.cmp_to_key(lambda a, b: _compare_paths(stations[a], stations[b])))
    return {name: i + 1 for i, name in enumerate(names)}


def _compare_paths(a: list[str], b: list[str]) -> int:
    """-1 when path a was reached before path b in program order, 1 after, 0 when unknown."""
    for fa, fb in zip(a, b):
        if fa == fb:
            continue
        ma, mb = _LABEL.match(fa), _LABEL.match(fb)
        if ma and mb and ma["func"] == mb["func"] and ma["file"] == mb["file"]:
            la, lb = int(ma["line"]), int(mb["line"])
            return (la > lb) - (la < lb)
        return 0
    return 0


def add_events(entries: list[TimelineEntry], events: Iterable[dict[str, Any]]) -> list[TimelineEntry]:
    """Merge log/recorder events ({rank, seq, op, ...}): each rank keeps its highest seq."""
    by_rank = {e.rank: e for e in entries}
    for ev in events:
        rank, seq = ev.get("rank"), ev.get("seq")
        if rank is None or seq is None or int(rank) not in by_rank:
            continue
        entry = by_rank[int(rank)]
        if entry.seq is None or int(seq) > entry.seq:
            entry.seq = int(seq)
            entry.last_event = f"{ev.get('op') or 'op'} #{seq}" + (f" {ev['state']}" if ev.get("state") else "")
            entry.source = str(ev.get("source") or "events")
    return entries


def op_events(ops: Iterable[Any]) -> list[dict[str, Any]]:
    """The logs judge's RankOps as events for `add_events` ({rank, seq, op, state, source})."""
    return [{"rank": o.rank, "seq": o.seq, "op": o.op, "source": f"logs ({o.numbering})",
             "state": "completed" if o.completed is not None and o.completed >= o.seq else "logged"} for o in ops]


def entries_from_ops(ops: Iterable[Any], verdict: Verdict) -> list[TimelineEntry]:
    """Entries of a post-mortem with no stacks: each rank where its logs stop (a RankOp each), in the
    one communicator the logs judge chose; a rank shown in another communicator is not placed."""
    ops = list(ops)
    if not ops:
        return []
    main = Counter(o.comm for o in ops).most_common(1)[0][0]
    suspects: dict[int, Any] = {}
    for s in reversed(verdict.suspects):  # most likely last, so it wins
        if s.rank is not None:
            suspects[s.rank] = s
    culprit = verdict.culprit.rank if verdict.culprit else None
    out = []
    for o in sorted(ops, key=lambda o: o.rank):
        same = o.comm == main
        s = suspects.get(o.rank)
        out.append(TimelineEntry(
            rank=o.rank, host=o.host, state=None, activity="logged", op=o.op, where=None,
            station=f"{o.op or 'op'} #{o.seq}" if same else NOT_PLACED, order=0, suspect=s is not None,
            culprit=o.rank == culprit, reason_class=str(s.reason_class) if s else None, reason=s.reason if s else None,
            seq=o.seq if same else None, last_event=None if same else o.text, source=f"logs ({o.numbering})"))
    index = {seq: i + 1 for i, seq in enumerate(sorted({e.seq for e in out if e.seq is not None}))}
    for e in out:  # program order is the position's order: a chart with a rank not placed still reads left to right
        e.order = index.get(e.seq, 0) if e.seq is not None else 0
    return out


def _short(where: str | None) -> str | None:
    if not where:
        return None
    m = _LABEL.match(where)
    if not m:
        return where
    return f"{m['func']} ({m['file'].replace(chr(92), '/').rsplit('/', 1)[-1]}:{m['line']})"


def tree_from_paths(paths: dict[int, list[str]]) -> dict[str, Any]:
    """A stack prefix tree dict ({'frame', 'ranks', 'children'}) from rank -> frames outermost first."""
    root: dict[str, Any] = {"frame": "<all>", "ranks": [], "children": []}
    index: dict[tuple[str, ...], dict[str, Any]] = {(): root}
    for rank, path in sorted(paths.items()):
        root["ranks"].append(rank)
        for depth in range(len(path)):
            key = tuple(path[: depth + 1])
            node = index.get(key)
            if node is None:
                node = {"frame": path[depth], "ranks": [], "children": []}
                index[key[:-1]]["children"].append(node)
                index[key] = node
            node["ranks"].append(rank)
    return root


def merged_tree(tree: dict[str, Any]) -> dict[str, Any]:
    """The tree again, with address-only frames normalised so that like ranks merge."""
    return tree_from_paths(rank_paths(tree))
