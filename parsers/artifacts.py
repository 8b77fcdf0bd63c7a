"""Load evidence as users have it: a directory of loose files, or files with hints.

Why: `forensics analyze` must work on a bundle (the manifest knows host, pid and
rank of each file: passed as hints) and on a plain directory a user scraped
together (nothing known but content and, weakly, the path). Each file is sniffed by
content, read by its reader, and kept with what it says about its origin. Bad input
is recorded per file and never stops the rest.

Identity precedence: what the content says (NCCL prefix host/pid, `[rankN]`, FR
rank) over explicit hints (bundle manifest) over the path (`rank3` in a name, the
parent folder taken as host when the files are grouped per host).
"""

from __future__ import annotations

import gc
import json
import os
from contextlib import contextmanager
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable

from parsers.model.events import Origin, Parsed
from parsers.readers import flight_recorder, nccl_log, pyspy_text, ras, rank_log
from parsers.sniff import HEAD_BYTES, KINDS, sniff_bytes

MAX_TEXT_BYTES = 2 * 1024 * 1024 * 1024
_RANK_IN_NAME = re.compile(r"(?:^|[^a-z])(?:rank|r)[_.-]?(\d{1,6})(?:\D|$)", re.I)
_GENERIC_DIRS = {"logs", "log", "nccl", "fr", "dumps", "stdout", "stderr", "out", "output", "artifacts", "tmp",
                 "ras", "pyspy", "stacks", "traces", "ranks", "hosts", "files"}
_SKIP_NAMES = {"truth.json", "summary.json"}  #: the scenario runner's own answer key, never evidence
#: kind hints a caller may pass (bundle manifest wording) -> reader kind
KIND_ALIASES = {"stdout": "rank-log", "stderr": "rank-log", "rank_log": "rank-log", "nccl_log": "nccl-log",
                "nccl": "nccl-log", "fr": "fr-dump", "flight_recorder": "fr-dump", "fr_dump": "fr-dump",
                "ras": "ras-text", "ras_text": "ras-text", "ras_json": "ras-json", "pyspy": "pyspy-json",
                "py-spy": "pyspy-json", "pyspy_json": "pyspy-json", "pyspy_text": "pyspy-text"}


@dataclass
class Artifact:
    """One file, what kind it is, what it contained, and who wrote it."""

    path: Path
    kind: str
    hints: dict[str, Any] = field(default_factory=dict)
    parsed: Parsed | None = None
    error: str | None = None

    def _fact(self, key: str) -> Any:
        if self.parsed and self.parsed.facts.get(key) is not None:
            return self.parsed.facts[key]
        return self.hints.get(key)

    @property
    def rank(self) -> int | None:
        value = self._fact("rank")
        return int(value) if value is not None else None

    @property
    def host(self) -> str | None:
        return self._fact("host")

    @property
    def pid(self) -> int | None:
        value = self._fact("pid")
        return int(value) if value is not None else None

    @property
    def unknown_lines(self) -> int:
        return self.parsed.unknown_lines if self.parsed else 0


@dataclass
class ArtifactSet:
    """Everything loaded, plus what was skipped and why."""

    artifacts: list[Artifact] = field(default_factory=list)
    skipped: list[tuple[str, str]] = field(default_factory=list)
    root: Path | None = None
    world_size: int | None = None  #: when a caller knows it (bundle manifest)

    def of_kind(self, *kinds: str) -> list[Artifact]:
        return [a for a in self.artifacts if a.kind in kinds]


@contextmanager
def pause_gc():
    """Pause the cyclic GC while building millions of small acyclic objects.

    Measured: correlating 16k ranks took 5-6 s with the GC on and 1.3-2 s with it
    paused, on this 2-core machine. Nothing built here forms cycles that need it.
    """
    was = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was:
            gc.enable()


def load_directory(path: Path | str) -> ArtifactSet:
    """Every regular file under `path` (hidden files and our own truth/manifest files skipped)."""
    root = Path(path)
    if not root.is_dir():
        raise ValueError(f"{root}: not a directory")
    files: list[tuple[Path, dict]] = []
    bundles: list[Path] = []
    for dirpath, dirnames, filenames in os.walk(root):
        here = Path(dirpath)
        if here != root and is_bundle(here):
            bundles.append(here)  # its files carry the collector's identities, not the ranks': see is_bundle
            dirnames[:] = []
            continue
        dirnames[:] = sorted(d for d in dirnames if not d.startswith("."))
        for name in sorted(filenames):
            if name.startswith(".") or name in _SKIP_NAMES:
                continue
            p = Path(dirpath) / name
            files.append((p, path_hints(p, root)))
    out = load_files(files)
    out.root = root
    out.skipped += [(str(b), "a forensics bundle inside the directory: analyse it on its own (forensics analyze)")
                    for b in bundles]
    return out


def is_bundle(folder: Path) -> bool:
    """True when `folder` is a hang-forensics bundle (its manifest.json says so).

    Why skip nested bundles: a bundle taken during the same hang holds copies of the
    loose logs, filed under the collecting machine's host name (one 'vm' for eight
    fake hosts) and paths of its own; read again here they would duplicate every
    rank's evidence under a second identity. `forensics analyze` reads a bundle with
    its manifest, which is the right tool for it.
    """
    manifest = folder / "manifest.json"
    try:
        with open(manifest, "rb") as fh:
            head = fh.read(HEAD_BYTES)
    except OSError:
        return False
    return sniff_bytes(head, complete=len(head) < HEAD_BYTES) == "bundle-manifest"


def path_hints(path: Path, root: Path) -> dict[str, Any]:
    """Weak identity from the path: a rank number in the name, a per-host parent folder."""
    hints: dict[str, Any] = {}
    m = _RANK_IN_NAME.search(path.name)
    if m:
        hints["rank"] = int(m.group(1))
    parent = path.parent
    if parent != root and parent.name.lower() not in _GENERIC_DIRS and not _RANK_IN_NAME.search(parent.name):
        hints["host"] = parent.name
    return hints


def load_files(files: Iterable[tuple[Path | str, dict]]) -> ArtifactSet:
    """Load (path, hints) pairs; hints: host, pid, rank, kind (skips sniffing)."""
    out = ArtifactSet()
    with pause_gc():
        for path, hints in files:
            _add(out, load_file(Path(path), dict(hints or {})))
    return out


def _add(out: ArtifactSet, art: Artifact) -> None:
    """Keep evidence; list what was skipped. A file that failed to parse is both kept and listed."""
    if art.kind in ("unknown", "binary", "empty", "bundle-manifest") or art.error and art.parsed is None:
        out.skipped.append((str(art.path), art.error or f"not evidence this tool reads ({art.kind})"))
        if art.error is None:
            return
    out.artifacts.append(art)


def load_file(path: Path, hints: dict[str, Any]) -> Artifact:
    """Sniff and read one file; errors are kept on the Artifact, never raised."""
    try:
        size = path.stat().st_size
        with open(path, "rb") as fh:
            head = fh.read(HEAD_BYTES)
    except OSError as err:
        return Artifact(path, "unreadable", hints, error=f"cannot read: {err.strerror or err}")
    hinted = KIND_ALIASES.get(str(hints.get("kind")), hints.get("kind"))
    kind = hinted if hinted in KINDS else sniff_bytes(head, complete=size <= len(head))
    art = Artifact(path, kind, hints)
    try:
        art.parsed = _read(path, kind, head, size, hints)
        if art.parsed is not None:
            _apply_hints(art.parsed, hints)
    except (ValueError, OSError, UnicodeError, RecursionError) as err:
        art.error = f"{kind}: {err}"
    return art


def _origin(path: Path, hints: dict[str, Any]) -> Origin:
    return Origin(host=hints.get("host"), pid=hints.get("pid"), rank=hints.get("rank"), file=str(path))


def _read(path: Path, kind: str, head: bytes, size: int, hints: dict[str, Any]) -> Parsed | None:
    if kind == "fr-dump":
        data = path.read_bytes()
        return flight_recorder.parse(flight_recorder.load_bytes(data), _origin(path, hints))
    if kind in ("unknown", "binary", "empty", "bundle-manifest"):
        return None
    if size > MAX_TEXT_BYTES:
        raise ValueError(f"file too large to read ({size} bytes)")
    if kind == "ras-json":
        return ras.parse_json_text(path.read_text(errors="replace"))
    if kind == "pyspy-json":
        return _pyspy_json(path)
    with open(path, encoding="utf-8", errors="replace", newline="") as fh:
        lines = _lines(fh)
        if kind == "ras-text":
            return ras.parse_text(lines)
        if kind == "pyspy-text":
            return pyspy_text.parse_lines(lines)
        if kind == "nccl-log":
            return nccl_log.parse_lines(lines, str(path))
        return rank_log.parse_lines(lines, str(path))


def _lines(fh) -> Iterable[str]:
    """Lines split on \\n only (a stray \\r from a progress bar must not split a record)."""
    for line in fh:
        yield line


def _apply_hints(parsed: Parsed, hints: dict[str, Any]) -> None:
    """Events with no origin rank/host take the file's (content first, then hints)."""
    rank = parsed.facts.get("rank", hints.get("rank"))
    host = parsed.facts.get("host", hints.get("host"))
    pid = parsed.facts.get("pid", hints.get("pid"))
    for ev in parsed.events:
        origin = getattr(ev, "origin", None)
        if origin is None:
            continue
        if origin.rank is None:
            origin.rank = rank
        if origin.host is None:
            origin.host = host
        if origin.pid is None:
            origin.pid = pid


def _pyspy_json(path: Path) -> Parsed:
    """py-spy --json is the lead's reader (parsers.readers.pyspy); fall back to pid facts only."""
    out = Parsed(kind="pyspy-json")
    try:
        from parsers.readers import pyspy  # type: ignore[attr-defined]

        reader = getattr(pyspy, "parse_json", None) or getattr(pyspy, "read_json", None)
    except ImportError:
        reader = None
    data = json.loads(path.read_text(errors="replace"))
    if reader is not None:
        try:
            out.stacks = list(reader(data))
        except Exception as err:  # noqa: BLE001 - a foreign reader's failure is a per-file problem
            out.problems.append(f"pyspy reader: {err}")
    if isinstance(data, list) and data and isinstance(data[0], dict) and data[0].get("pid"):
        out.facts["pid"] = data[0]["pid"]
    return out
