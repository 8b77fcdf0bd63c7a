"""Small helpers shared by the host collectors: writing raw copies, reading sysfs.

Host collectors copy what the host says and never judge it; these helpers keep
that copying uniform (bounded size, UTF-8 with replacement, bundle-relative paths).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from forensics import safefs
from forensics.collectors.base import HostTarget

#: Per-file cap on what one sysfs or procfs read may return (they are tiny; this guards odd files).
SMALL_READ = 64 * 1024


def tail(text: str, max_bytes: int) -> tuple[str, bool]:
    """The last `max_bytes` of text, cut at a line start; and whether anything was cut."""
    data = text.encode("utf-8", "replace")
    if len(data) <= max_bytes:
        return text, False
    cut = data[-max_bytes:]
    newline = cut.find(b"\n")
    if 0 <= newline < len(cut) - 1:
        cut = cut[newline + 1 :]
    return cut.decode("utf-8", "replace"), True


def save_text(target: HostTarget, name: str, text: str) -> str:
    """Write `text` as host file `name`; returns its bundle-relative path."""
    path, rel = target.out(name)
    safefs.write_new(path, text.encode("utf-8", "replace"))
    return rel


def save_json(target: HostTarget, name: str, data: Any) -> str:
    """Write `data` as JSON host file `name`; returns its bundle-relative path."""
    return save_text(target, name, json.dumps(data, indent=1, sort_keys=True, default=str) + "\n")


def read_small(path: Path) -> str | None:
    """Text of a small pseudo-file, stripped; None when absent or unreadable."""
    try:
        with open(path, "rb") as handle:
            return handle.read(SMALL_READ).decode("utf-8", "replace").strip()
    except OSError:
        return None
