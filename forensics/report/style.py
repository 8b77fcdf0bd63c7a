"""Shared look of every picture, and the one place matplotlib is set up.

Figures are made without pyplot: no GUI toolkit, no global figure list, and no
change to the backend of a notebook that plots with pyplot itself (PNG goes
through matplotlib's Agg renderer, SVG through its SVG renderer). SVG keeps text
as text, so the HTML report stays searchable and self-contained.

Text from a bundle is untrusted and may hold '$', which matplotlib would read as
maths: every label goes through `text()` here, which turns that parsing off.
"""

from __future__ import annotations

import io
import re
from typing import Any

import matplotlib
from matplotlib.axes import Axes
from matplotlib.figure import Figure

CULPRIT = "#d62728"  #: red: the rank(s) the verdict names
SUSPECT = "#ff9896"  #: light red: other suspects
WAITER = "#4c72b0"  #: blue: ranks that wait (victims)
OTHER = "#9a9a9a"  #: grey: no stack, unknown
EDGE = "#555555"
FONT = "DejaVu Sans"
MONO = "DejaVu Sans Mono"


def new_figure(width: float, height: float, full: bool = False) -> tuple[Figure, Axes]:
    """A figure with one axes; sizes in inches, clamped to sane bounds.

    full=True makes the axes fill the figure, so one data unit can be one inch
    (the stack tree lays boxes out in inches to fit their text).
    """
    fig = Figure(figsize=(max(2.0, min(width, 60.0)), max(1.5, min(height, 80.0))), dpi=100)
    ax = fig.add_axes((0, 0, 1, 1)) if full else fig.add_subplot(1, 1, 1)
    return fig, ax


def text(ax: Axes, x: float, y: float, s: str, **kw: Any):
    """ax.text with maths parsing off, so '$' in a frame name stays a '$'."""
    kw.setdefault("fontfamily", FONT)
    return ax.text(x, y, s, parse_math=False, **kw)


def to_svg(fig: Figure) -> str:
    """The figure as an SVG document string, text kept as <text> elements."""
    buf = io.StringIO()
    with matplotlib.rc_context({"svg.fonttype": "none", "svg.hashsalt": "hang-forensics"}):
        fig.savefig(buf, format="svg", bbox_inches="tight", metadata={"Date": None})
    svg = re.sub(r"<metadata>.*?</metadata>", "", buf.getvalue(), flags=re.S)  # RDF block: noise in a report
    start = svg.find("<svg")
    return svg[start:] if start >= 0 else svg


def to_png(fig: Figure, dpi: int = 100) -> bytes:
    """The figure as PNG bytes (for notebooks that prefer bitmaps, and for tests)."""
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=dpi, bbox_inches="tight")
    return buf.getvalue()


def shorten_path(label: str) -> str:
    """'f (/long/path/to/file.py:12)' -> 'f (file.py:12)': pictures need names, not paths."""
    if "(" in label and label.endswith(")"):
        head, _, where = label.rpartition(" (")
        where = where[:-1]
        tail = where.replace("\\", "/").rsplit("/", 1)[-1]
        return f"{head} ({tail})"
    return label


def clip(s: str, width: int) -> str:
    """Cut a label to `width` characters with an ellipsis."""
    return s if len(s) <= width else s[: max(1, width - 1)] + "…"
