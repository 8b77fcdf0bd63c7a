"""Small helpers shared by the host collectors: writing raw copies, reading sysfs.

Host collectors copy what the host says and never judge it; these helpers keep
that copying uniform (bounded size, UTF-8 with replacement, bundle-relative paths).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from parsers.model.manifest import CollectorRecord, Status
from forensics.collect.budget import write_whole, write_within
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


def save_text(target: HostTarget, name: str, text: str, keep: str = "first") -> str | None:
    """Write `text` as host file `name` within the host's bytes left (its budget draws on the collection's too):
    whole, or cut at a line boundary keeping its `keep` ("first" or "last") lines with a cut line its reader
    skips, or left out when not even that fits. Returns its bundle-relative path (None when left out); a cut is
    said in the manifest's note. Why: a host's files were written whole, outside every byte cap."""
    path, rel = target.out(name)
    written, _cut = write_within(target.budget, path, text.encode("utf-8", "replace"), f"{target.host} {name}",
                                 lines=keep)
    return rel if written else None


def save_json(target: HostTarget, name: str, data: Any) -> str | None:
    """Write `data` as JSON host file `name`, whole within the host's bytes left or not at all (cut JSON is
    unreadable); returns its bundle-relative path, None when left out (said in the manifest's note)."""
    return save_whole(target, name, json.dumps(data, indent=1, sort_keys=True, default=str) + "\n")


def save_whole(target: HostTarget, name: str, text: str) -> str | None:
    """Write `text` (JSON, XML: a cut would leave it unreadable) whole within the host's bytes left, or not at
    all; returns its bundle-relative path, None when left out (said in the manifest's note)."""
    path, rel = target.out(name)
    return None if write_whole(target.budget, path, text, f"{target.host} {name}") else rel


def left_out(target: HostTarget, collector: str, name: str) -> CollectorRecord:
    """The record of a host collector whose one file did not fit the host's bytes left."""
    return CollectorRecord(collector, Status.SKIPPED, error=f"{name} left out ({target.budget.which()} reached)")


def read_small(path: Path) -> str | None:
    """Text of a small pseudo-file, stripped; None when absent or unreadable."""
    try:
        with open(path, "rb") as handle:
            return handle.read(SMALL_READ).decode("utf-8", "replace").strip()
    except OSError:
        return None
