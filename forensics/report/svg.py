"""A small SVG canvas in pure Python: the report's pictures need no plotting library.

Every label is monospaced, so its width is known before it is drawn (0.6 em per
character, the advance of DejaVu Sans Mono, Menlo and Consolas alike): the layouts
place labels where they fit, `Canvas.fits` refuses a label that would cover another,
and `Canvas.labels` keeps every label's box so tests can prove that none overlap.

Text from a bundle is untrusted: every string is XML-escaped here, and nothing
from the bundle ever becomes an attribute name, a tag or a URL.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from xml.sax.saxutils import escape, quoteattr

MONO = "'DejaVu Sans Mono',Menlo,Consolas,'Liberation Mono',monospace"
CHAR_EM = 0.6  #: advance of one monospaced character, in em
ASCENT = 0.8  #: share of the font size above the baseline (box top), for label boxes
DESCENT = 0.25
MAX_LABEL = 400  #: characters; a longer label is cut (a hostile bundle can hold any length)


@dataclass(frozen=True)
class Rect:
    """An axis-aligned rectangle, y downwards (SVG user units)."""

    x0: float
    y0: float
    x1: float
    y1: float

    def overlaps(self, other: "Rect", pad: float = 0.0) -> bool:
        return not (self.x1 + pad <= other.x0 or other.x1 + pad <= self.x0
                    or self.y1 + pad <= other.y0 or other.y1 + pad <= self.y0)


def text_width(s: str, size: float) -> float:
    """Width of a monospaced label of `s` at font size `size`."""
    return len(s) * size * CHAR_EM


def text_box(x: float, y: float, s: str, size: float, anchor: str = "start") -> Rect:
    """The rectangle of a label whose baseline starts (or is centred, or ends) at x, y."""
    w = text_width(s, size)
    left = x if anchor == "start" else x - w / 2 if anchor == "middle" else x - w
    return Rect(left, y - size * ASCENT, left + w, y + size * DESCENT)


@dataclass
class Label:
    """One drawn label: its text and its box (for the overlap checks)."""

    text: str
    box: Rect
    group: str = ""


@dataclass
class Canvas:
    """Collects shapes and labels; `svg()` writes the document, sized to what was drawn."""

    title: str = ""
    items: list[str] = field(default_factory=list)
    labels: list[Label] = field(default_factory=list)
    extent: list[float] = field(default_factory=lambda: [0.0, 0.0, 1.0, 1.0])
    margin: float = 8.0

    # --- geometry -------------------------------------------------------------------
    def _grow(self, box: Rect) -> None:
        e = self.extent
        e[0], e[1], e[2], e[3] = min(e[0], box.x0), min(e[1], box.y0), max(e[2], box.x1), max(e[3], box.y1)

    def fits(self, box: Rect, pad: float = 1.0) -> bool:
        """True when `box` covers no label drawn so far."""
        return not any(box.overlaps(lab.box, pad) for lab in self.labels)

    # --- shapes ---------------------------------------------------------------------
    def rect(self, x: float, y: float, w: float, h: float, fill: str = "none", stroke: str = "none",
             width: float = 1.0, rx: float = 0.0, opacity: float = 1.0, tip: str | None = None) -> None:
        attrs = f'x="{x:.1f}" y="{y:.1f}" width="{max(0.0, w):.1f}" height="{max(0.0, h):.1f}" fill={quoteattr(fill)}'
        if stroke != "none":
            attrs += f' stroke={quoteattr(stroke)} stroke-width="{width:g}"'
        if rx:
            attrs += f' rx="{rx:g}"'
        if opacity < 1:
            attrs += f' fill-opacity="{opacity:g}"'
        self.items.append(f"<rect {attrs}>{_tip(tip)}</rect>" if tip else f"<rect {attrs}/>")
        self._grow(Rect(x, y, x + w, y + h))

    def circle(self, cx: float, cy: float, r: float, fill: str, stroke: str = "white", width: float = 1.0,
               tip: str | None = None, cls: str = "") -> None:
        c = f' class={quoteattr(cls)}' if cls else ""
        body = (f'<circle{c} cx="{cx:.1f}" cy="{cy:.1f}" r="{r:.1f}" fill={quoteattr(fill)} stroke={quoteattr(stroke)} '
                f'stroke-width="{width:g}"')
        self.items.append(f"{body}>{_tip(tip)}</circle>" if tip else body + "/>")
        self._grow(Rect(cx - r, cy - r, cx + r, cy + r))

    def line(self, x1: float, y1: float, x2: float, y2: float, stroke: str, width: float = 1.0,
             arrow: bool = False, opacity: float = 1.0, dash: str | None = None) -> None:
        attrs = (f'x1="{x1:.1f}" y1="{y1:.1f}" x2="{x2:.1f}" y2="{y2:.1f}" stroke={quoteattr(stroke)} '
                 f'stroke-width="{width:g}"')
        if opacity < 1:
            attrs += f' stroke-opacity="{opacity:g}"'
        if dash:
            attrs += f' stroke-dasharray="{dash}"'
        if arrow:
            attrs += f' marker-end="url(#{_marker_id(stroke)})"'
        self.items.append(f"<line {attrs}/>")
        self._grow(Rect(min(x1, x2), min(y1, y2), max(x1, x2), max(y1, y2)))

    def arrow_between(self, a: tuple[float, float], b: tuple[float, float], ra: float, rb: float, stroke: str,
                      width: float = 1.2, opacity: float = 0.8) -> None:
        """An arrow from the rim of a circle at a (radius ra) to the rim of one at b (radius rb)."""
        dx, dy = b[0] - a[0], b[1] - a[1]
        d = math.hypot(dx, dy) or 1.0
        ux, uy = dx / d, dy / d
        self.line(a[0] + ux * ra, a[1] + uy * ra, b[0] - ux * (rb + 3), b[1] - uy * (rb + 3), stroke, width, True,
                  opacity)

    # --- text -----------------------------------------------------------------------
    def text(self, x: float, y: float, s: str, size: float = 12.0, anchor: str = "start", color: str = "#222222",
             bold: bool = False, group: str = "", backdrop: bool = False) -> Label:
        """A label with its baseline at y; recorded for the overlap checks. Returns it."""
        s = s if len(s) <= MAX_LABEL else s[: MAX_LABEL - 1] + "…"
        box = text_box(x, y, s, size, anchor)
        if backdrop:  # a white patch under the text, so lines drawn earlier do not cross it
            self.rect(box.x0 - 2, box.y0 - 1, box.x1 - box.x0 + 4, box.y1 - box.y0 + 2, fill="white", opacity=0.9)
        weight = ' font-weight="bold"' if bold else ""
        self.items.append(f'<text x="{x:.1f}" y="{y:.1f}" font-size="{size:g}" text-anchor="{anchor}" '
                          f'fill={quoteattr(color)}{weight} xml:space="preserve">{escape(s)}</text>')
        label = Label(s, box, group)
        self.labels.append(label)
        self._grow(box)
        return label

    # --- output ---------------------------------------------------------------------
    def svg(self) -> str:
        """The SVG document (no XML prolog: it is inlined into HTML or shown by Jupyter)."""
        x0, y0, x1, y1 = self.extent
        m = self.margin
        w, h = x1 - x0 + 2 * m, y1 - y0 + 2 * m
        markers = "".join(
            f'<marker id="{_marker_id(c)}" viewBox="0 0 10 10" refX="9" refY="5" markerUnits="userSpaceOnUse" '
            f'markerWidth="9" markerHeight="9" '
            f'orient="auto-start-reverse"><path d="M0,0 L10,5 L0,10 z" fill={quoteattr(c)}/></marker>'
            for c in sorted(_arrow_colours(self.items)))
        title = f"<title>{escape(self.title)}</title>" if self.title else ""
        return (f'<svg xmlns="http://www.w3.org/2000/svg" width="{w:.0f}" height="{h:.0f}" '
                f'viewBox="{x0 - m:.1f} {y0 - m:.1f} {w:.1f} {h:.1f}" font-family="{MONO}">'
                f"{title}<defs>{markers}</defs>" + "".join(self.items) + "</svg>")

    @property
    def size(self) -> tuple[float, float]:
        x0, y0, x1, y1 = self.extent
        return x1 - x0 + 2 * self.margin, y1 - y0 + 2 * self.margin


def overlapping_labels(labels: list[Label], pad: float = 0.0) -> list[tuple[Label, Label]]:
    """Every pair of labels whose boxes overlap (sweep over x, so 10,000 labels stay fast)."""
    order = sorted(labels, key=lambda lab: lab.box.x0)
    out = []
    active: list[Label] = []
    for lab in order:
        active = [a for a in active if a.box.x1 + pad > lab.box.x0]
        out += [(a, lab) for a in active if a.box.overlaps(lab.box, pad)]
        active.append(lab)
    return out


def _tip(tip: str | None) -> str:
    return f"<title>{escape(tip[:MAX_LABEL])}</title>" if tip else ""


def _marker_id(colour: str) -> str:
    return "arrow-" + "".join(ch for ch in colour if ch.isalnum())


def _arrow_colours(items: list[str]) -> set[str]:
    found = set()
    for item in items:
        if 'marker-end="url(#arrow-' in item:
            start = item.index('stroke="') + len('stroke="')
            found.add(item[start: item.index('"', start)])
    return found
