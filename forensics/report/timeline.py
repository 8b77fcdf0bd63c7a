"""Picture of 'last operation reached' per rank: who stopped where, at a glance.

One lane per rank (or, past MAX_LANES ranks, per class of ranks that stopped at the
same place in the same state), a bar from the start to the position it reached,
positions left to right in program order (or by collective sequence number when
log events give one). The culprit's lane is red; ranks that cannot be placed (no
stack, no process) sit in the first column with their state.
"""

from __future__ import annotations

import textwrap
from dataclasses import dataclass
from typing import Sequence

from forensics.report.lastop import NOT_PLACED, TimelineEntry
from forensics.report import style
from forensics.report.svg import Canvas, text_width
from parsers.model.ranges import fold

MAX_LANES = 24
FONT = 10.5  #: px
ROW = 24.0  #: px per lane
WRAP = 24  #: characters per line of a column name


@dataclass
class Lane:
    """One row of the chart: a rank or a class of ranks at the same position."""

    ranks: list[int]
    x: int
    station: str
    state: str | None
    activity: str
    suspect: bool
    culprit: bool
    detail: str = ""

    @property
    def title(self) -> str:
        return (f"rank {self.ranks[0]}" if len(self.ranks) == 1
                else f"ranks {style.clip(fold(self.ranks), 28)} ({len(self.ranks)})")


def lanes(entries: Sequence[TimelineEntry], max_lanes: int = MAX_LANES) -> tuple[list[Lane], list[str], bool]:
    """(lanes, column names, by_seq): one lane per entry, or per class when there are many."""
    by_seq = bool(entries) and all(e.seq is not None for e in entries)
    if by_seq:
        seqs = sorted({e.seq for e in entries})  # type: ignore[type-var]
        columns = [f"#{s}" for s in seqs]
        index = {s: i for i, s in enumerate(seqs)}
        xs = {id(e): index[e.seq] for e in entries}
    else:
        names = {e.order: e.station for e in entries}
        base = 0 if 0 in names else 1  # no 'not placed' column when every rank is placed
        names.setdefault(0, NOT_PLACED)
        columns = [names.get(i, "?") for i in range(base, max(names) + 1)]
        xs = {id(e): e.order - base for e in entries}
    if len(entries) <= max_lanes:
        out = [
            Lane([e.rank], xs[id(e)], e.station, e.state, e.activity, e.suspect, e.culprit, _detail(e))
            for e in sorted(entries, key=lambda e: e.rank)
        ]
    else:
        groups: dict[tuple, list[TimelineEntry]] = {}
        for e in entries:
            key = ("rank", e.rank) if e.suspect else ("class", xs[id(e)], e.state, e.activity)
            groups.setdefault(key, []).append(e)
        out = []
        for group in groups.values():
            head = group[0]
            out.append(Lane(sorted(e.rank for e in group), xs[id(head)], head.station, head.state, head.activity,
                            head.suspect, any(e.culprit for e in group), _detail(head)))
        out.sort(key=lambda lane: lane.ranks[0])
    return out, columns, by_seq


def _detail(e: TimelineEntry) -> str:
    bits = []
    if e.culprit:
        bits.append("CULPRIT")
    if e.suspect and e.reason and e.activity in ("missing", "unknown"):  # no position: the reason says what happened
        bits.append(style.clip(e.reason.split(";")[0].split(" and ")[0], 56))
    elif e.reason_class:
        bits.append(e.reason_class)
    if e.state and (e.state not in ("S", "R") or e.suspect) and f"state {e.state}" not in " ".join(bits):
        bits.append(f"state {e.state}")
    if e.activity == "missing" and "no process" not in " ".join(bits):
        bits.append("no process")
    elif e.activity == "unknown":
        bits.append("no stack")
    elif e.activity == "logged" and e.op and e.seq is not None:  # a logs-only lane: what it called there
        bits.append(e.op)
    if e.last_event:
        bits.append(e.last_event)
    return ", ".join(bits)


def draw_timeline(entries: Sequence[TimelineEntry], max_lanes: int = MAX_LANES, title: str | None = None,
                  axis: str | None = None) -> Canvas:
    """SVG picture: lanes of ranks, bars to the last position each reached.

    Lane titles sit in a left column as wide as the longest; columns are as wide as
    their wrapped names; each lane's detail is written right of its marker, on the
    lane's own line, and the picture widens to hold it: no two labels can meet.
    """
    rows, columns, by_seq = lanes(entries, max_lanes)
    ncols = max(1, len(columns))
    canvas = Canvas(title="last operation reached")
    heads = [textwrap.wrap(style.clip(c, 90), WRAP) or [c] for c in columns] or [[""]]
    col_w = max(110.0, max(text_width(line, FONT) for lines in heads for line in lines) + 16)
    left = max((text_width(r.title, FONT) for r in rows), default=40.0) + 14
    canvas.text(0, 14, title or "last operation reached per rank", size=13, bold=True)
    top = 34.0
    xs = [left + col_w * (i + 0.5) for i in range(ncols)]
    bottom = top + ROW * max(1, len(rows))
    for x in xs:
        canvas.line(x, top - 6, x, bottom, "#dddddd", 1, dash="4,3")
    canvas.line(left, bottom, left + col_w * ncols, bottom, "#888888", 1)
    for i, lane in enumerate(rows):
        y = top + ROW * i + ROW / 2
        color = (style.CULPRIT if lane.culprit else style.SUSPECT if lane.suspect
                 else style.OTHER if lane.activity in ("missing", "unknown") else style.WAITER)
        canvas.rect(left + 4, y - 7, xs[lane.x] - left - 4, 14, fill=color, opacity=0.55 if lane.suspect else 0.35)
        r = 7.0 if lane.culprit else 5.5
        canvas.circle(xs[lane.x], y, r, color, stroke="black" if lane.culprit else "white", width=1.5,
                      tip=f"{lane.title}: {lane.station}", cls="lane culprit" if lane.culprit else "lane")
        canvas.text(left - 8, y + FONT * 0.35, lane.title, size=FONT, anchor="end", group="lane",
                    color=style.CULPRIT if lane.culprit else "#222222", bold=lane.culprit)
        if lane.detail:
            canvas.text(xs[lane.x] + r + 6, y + FONT * 0.35, lane.detail, size=FONT - 0.5, color="#333333",
                        group="detail")
    for x, lines in zip(xs, heads):
        for j, line in enumerate(lines):
            canvas.text(x, bottom + 16 + j * (FONT + 3), line, size=FONT, anchor="middle", group="column")
    depth = max(len(lines) for lines in heads)
    if by_seq or axis is None:
        axis = ((axis or "collective sequence number") if by_seq
                else "last position reached (program order, from stacks)")
    canvas.text(left + col_w * ncols / 2, bottom + 24 + depth * (FONT + 3), axis, size=11, anchor="middle",
                color="#444444")
    return canvas
