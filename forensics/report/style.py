"""Shared look of every picture: colours, label shortening, and SVG output.

Pictures are drawn with forensics.report.svg (pure Python, no plotting library), so
`forensics report` and the notebook pictures work from the base install. SVG keeps
text as text: the HTML report stays searchable and self-contained.
"""

from __future__ import annotations

from forensics.report.svg import Canvas

CULPRIT = "#d62728"  #: red: the rank(s) the verdict names
SUSPECT = "#ff9896"  #: light red: other suspects
WAITER = "#4c72b0"  #: blue: ranks that wait (victims)
OTHER = "#9a9a9a"  #: grey: no stack, unknown
EDGE = "#555555"


def to_svg(canvas: Canvas) -> str:
    """The picture as an SVG document string."""
    return canvas.svg()


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
