"""Load a folder of logs the fast way: logs through logscan (head, tail, what they point at), in parallel.

Why a separate loader: parsers.artifacts reads every line of every file, which is right
for a bundle of tail-copied logs and far too slow for a 100 GB folder of full NCCL logs.
This gives the same ArtifactSet (so parsers.correlate and the verdict take it
unchanged): text logs (nccl-log, rank-log) go through `logscan.scan_file`, every other
kind through `artifacts.load_file`. Files are read by `workers` processes (the per-file
work is CPU-bound Python; threads would share one core); results come back pickled
from our own worker processes, never from the files themselves.
"""

from __future__ import annotations

import os
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path
from typing import Any

from parsers import artifacts as arts
from parsers.readers import logscan
from parsers.sniff import HEAD_BYTES, sniff_bytes

LOG_KINDS = ("nccl-log", "rank-log")


def scan_one(path: str, hints: dict[str, Any], mode: str = "head-tail") -> arts.Artifact:
    """One file: logs scanned, anything else loaded as parsers.artifacts does."""
    p = Path(path)
    try:
        size = p.stat().st_size
        with open(p, "rb") as fh:
            head = fh.read(HEAD_BYTES)
    except OSError as err:
        return arts.Artifact(p, "unreadable", hints, error=f"cannot read: {err.strerror or err}")
    kind = sniff_bytes(head, complete=size <= len(head))
    if kind not in LOG_KINDS:
        return arts.load_file(p, hints)
    art = arts.Artifact(p, kind, hints)
    try:
        art.parsed = logscan.scan_file(p, kind, mode=mode)
        arts._apply_hints(art.parsed, hints)
    except (ValueError, OSError, UnicodeError) as err:
        art.error = f"{kind}: {err}"
    return art


def _scan_batch(batch: list[tuple[str, dict]], mode: str) -> list[arts.Artifact]:
    with arts.pause_gc():
        return [scan_one(p, h, mode) for p, h in batch]


def scan_directory(path: Path | str, workers: int | None = None, mode: str = "head-tail") -> arts.ArtifactSet:
    """Every regular file under `path`, as parsers.artifacts.load_directory walks it."""
    root = Path(path)
    if not root.is_dir():
        raise ValueError(f"{root}: not a directory")
    files: list[tuple[str, dict]] = []
    for dirpath, dirnames, filenames in os.walk(root):
        here = Path(dirpath)
        if here != root and arts.is_bundle(here):
            dirnames[:] = []
            continue
        dirnames[:] = sorted(d for d in dirnames if not d.startswith("."))
        for name in sorted(filenames):
            if name.startswith(".") or name in arts._SKIP_NAMES:
                continue
            p = here / name
            files.append((str(p), arts.path_hints(p, root)))
    workers = workers or min(len(files), os.cpu_count() or 1) or 1
    out = arts.ArtifactSet(root=root)
    batches = [files[i::workers] for i in range(workers)] if workers > 1 else [files]
    if workers > 1 and len(files) > 1:
        with ProcessPoolExecutor(workers) as pool:
            results = [a for part in pool.map(_scan_batch, batches, [mode] * len(batches)) for a in part]
    else:
        results = _scan_batch(files, mode)
    order = {p: i for i, (p, _) in enumerate(files)}
    for art in sorted(results, key=lambda a: order[str(a.path)]):
        arts._add(out, art)
    return out
