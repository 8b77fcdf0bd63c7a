"""Recognise an artifact by its content, never by its name.

Why: users hand over whatever they have (`slurm-1234.out`, `log.txt`, `core-dump`,
a Flight Recorder file with no extension); names lie, content does not. The first
64 KiB decide: pickle/JSON Flight Recorder, RAS text/JSON, py-spy text/JSON, NCCL
debug log, or a generic text log (rank stdout/stderr) whose lines are dispatched.
"""

from __future__ import annotations

import json
import re

from parsers.readers import flight_recorder, nccl_log, pyspy_text, ras

HEAD_BYTES = 64 * 1024

#: every kind a reader exists for; 'unknown' and 'binary' are skipped with a reason
KINDS = ("fr-dump", "ras-text", "ras-json", "pyspy-text", "pyspy-json", "nccl-log", "rank-log", "bundle-manifest",
         "unknown", "binary", "empty")

_NCCL_REC = re.compile(r"[\w.-]+:\d+:\d+ \[[^\]]*\] (?:[\w./-]+:\d+(?: \([^)]*\))? )?NCCL (?:INFO|WARN|TRACE)")


def sniff_bytes(head: bytes, complete: bool = False) -> str:
    """Kind of an artifact from its first bytes. `complete`: head is the whole file (JSON can be parsed)."""
    if not head.strip():
        return "empty"
    if flight_recorder.looks_like(head):
        return "fr-dump"
    if head[:1] == b"\x80":
        return "binary"
    if b"\x00" in head[:4096]:
        return "binary"
    text = head.decode("utf-8", errors="replace")
    stripped = text.lstrip()
    if stripped[:1] in "{[":
        kind = _json_kind(stripped, complete)
        if kind:
            return kind
    if "SERVER PROTOCOL" in text[:200] or ras.looks_like_text(text):
        if "{" in text[:400] and '"ranks"' in text:
            return "ras-json"
        return "ras-text"
    if pyspy_text.looks_like(stripped):
        return "pyspy-text"
    lines = [ln for ln in text.splitlines()[:400] if ln.strip()]
    if lines:
        nccl = sum(1 for ln in lines if _NCCL_REC.search(ln))
        if nccl * 2 >= len(lines):
            return "nccl-log"
    return "rank-log"


def _json_kind(text: str, complete: bool) -> str | None:
    head = text[:HEAD_BYTES]
    if '"pg_status"' in head or ('"entries"' in head and '"profiling_name"' in head):
        return "fr-dump"
    if '"format": "hang-forensics-bundle"' in head or '"format":"hang-forensics-bundle"' in head:
        return "bundle-manifest"
    if '"missing_ranks"' in head or '"collective_counts"' in head or ('"ranks"' in head and '"secondary_hash"' in head):
        return "ras-json"
    if '"thread_id"' in head and '"frames"' in head:
        return "pyspy-json"
    if complete:
        try:
            obj = json.loads(text)
        except json.JSONDecodeError:
            return None
        if ras.looks_like_json(obj):
            return "ras-json"
    return "unknown" if complete else None
