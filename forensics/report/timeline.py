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

from forensics.postmortem.timeline import NOT_PLACED, TimelineEntry
from forensics.report import style
from parsers.ranges import fold

MAX_LANES = 24


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
        return f"rank {self.ranks[0]}" if len(self.ranks) == 1 else f"ranks {style.clip(fold(self.ranks), 28)} ({len(self.ranks)})"


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
    if e.last_event:
        bits.append(e.last_event)
    return ", ".join(bits)


def draw_timeline(entries: Sequence[TimelineEntry], max_lanes: int = MAX_LANES, title: str | None = None):
    """Matplotlib figure: lanes of ranks, bars to the last position each reached."""
    rows, columns, by_seq = lanes(entries, max_lanes)
    ncols = max(1, len(columns))
    fig, ax = style.new_figure(3.2 + 2.3 * ncols, 1.6 + 0.36 * max(1, len(rows)))
    for i, lane in enumerate(rows):
        y = len(rows) - 1 - i
        color = style.CULPRIT if lane.culprit else style.SUSPECT if lane.suspect else style.OTHER if lane.activity in ("missing", "unknown") else style.WAITER
        ax.barh(y, lane.x + 0.45, left=-0.45, height=0.55, color=color, alpha=0.35 if not lane.suspect else 0.55)
        ax.plot([lane.x], [y], marker="X" if lane.activity in ("missing",) else "o", markersize=11 if lane.culprit else 8,
                color=color, markeredgecolor="black" if lane.culprit else "white", zorder=3)
        if lane.detail:
            style.text(ax, lane.x + 0.1, y, lane.detail, va="center", fontsize=8, color="#333333")
    ax.set_yticks(range(len(rows)))
    ax.set_yticklabels([r.title for r in reversed(rows)], fontsize=8.5)
    for label, lane in zip(ax.get_yticklabels(), reversed(rows)):
        if lane.culprit:
            label.set_color(style.CULPRIT)
            label.set_fontweight("bold")
    ax.set_xticks(range(ncols))
    ax.set_xticklabels(["\n".join(textwrap.wrap(style.clip(c, 90), 24)) or c for c in columns], fontsize=8)
    for label in ax.get_xticklabels():
        label.set_parse_math(False)  # station names come from the bundle and may hold '$'
    ax.set_xlim(-0.5, ncols - 0.5 + (0.8 if any(r.detail for r in rows) else 0.1))
    ax.set_ylim(-0.7, len(rows) - 0.3)
    ax.grid(axis="x", color="#dddddd", linestyle="--")
    ax.set_axisbelow(True)
    for side in ("top", "right"):
        ax.spines[side].set_visible(False)
    ax.set_xlabel("collective sequence number" if by_seq else "last position reached (program order, from stacks)", fontsize=9)
    ax.set_title(title or "last operation reached per rank", fontsize=11, weight="bold", loc="left")
    return fig
