"""Writes a bundle directory: per-rank folders, job-level artifacts, then manifest.json.

The manifest is written atomically (temp file + rename) and can be rewritten as
collection goes on, so a bundle cut short still names what it holds. Every other file is
created new (forensics.safefs: O_CREAT|O_EXCL|O_NOFOLLOW, 0600) and every folder is made
by us (0700) without following a link: a name planted in the bundle is never written through.
"""

from __future__ import annotations

import datetime as _dt
import dataclasses
import json
import os
import re
import sys
import threading
from pathlib import Path
from typing import Any

from forensics import __version__, safefs
from forensics.errors import ForensicsError
from forensics.bundle.redact import redact_argv
from forensics.bundle.encode import to_json
from parsers.model.manifest import MANIFEST_NAME, JobArtifact, HostRecord, Manifest, MissingRank, RankRecord

INDENT_UP_TO = 1000  #: manifest.json is indented up to this many ranks and hosts (see _write)
_UNSAFE = re.compile(r"[^A-Za-z0-9._-]+")


def safe_name(text: str) -> str:
    """A file-name-safe form of a host name or label (no slashes, no dot-dot)."""
    cleaned = _UNSAFE.sub("_", text).strip("._") or "unnamed"
    return cleaned[:120]


def unique_name(base: str, taken: set[str]) -> str:
    """`base`, or 2.base, 3.base...: the first not in `taken` (which it joins). Two files of one name both stay."""
    name, n = base, 1
    while name in taken:
        n += 1
        name = f"{n}.{base}"
    taken.add(name)
    return name


def now_iso() -> str:
    """UTC timestamp with microseconds, as used throughout the manifest."""
    return _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="microseconds")


class BundleWriter:
    """Lays out one bundle directory and keeps its manifest."""

    def __init__(self, root: Path, command: list[str] | None = None) -> None:
        self.root = Path(root)
        try:
            safefs.ensure_folder(self.root)
            probe = self.root / f".write-test.{os.getpid()}.{threading.get_ident()}"
            os.close(safefs.create(probe))  # new, O_EXCL|O_NOFOLLOW: a planted name fails, never followed
            probe.unlink()
        except OSError as err:
            raise ForensicsError(f"cannot write the bundle at {self.root}: {err.strerror or err}") from err
        self.manifest = Manifest(
            created=now_iso(), tool_version=__version__, command=redact_argv(command or sys.argv)
        )
        self.in_progress: list[RankRecord] = []  #: ranks being collected (collectors appended as each ends)

    def rank_dir(self, host: str, rank: int | None, pid: int) -> str:
        """Relative folder for one rank's evidence, created on disk."""
        label = f"rank{rank}" if rank is not None else "rank_unknown"
        rel = f"hosts/{safe_name(host)}/{label}-pid{pid}"
        safefs.make_dirs(self.root, rel)
        return rel

    def host_dir(self, host: str) -> str:
        """Relative folder for host-level evidence, created on disk."""
        rel = f"hosts/{safe_name(host)}"
        safefs.make_dirs(self.root, rel)
        return rel

    def write_json(self, rel: str, data: Any) -> str:
        """Write `data` as JSON at a path relative to the bundle root; returns `rel`."""
        safefs.make_dirs(self.root, Path(rel).parent)
        safefs.write_new(self.root / rel, json.dumps(data, indent=1, default=str) + "\n")
        return rel

    def write_text(self, rel: str, text: str) -> str:
        """Write text at a path relative to the bundle root; returns `rel`."""
        safefs.make_dirs(self.root, Path(rel).parent)
        safefs.write_new(self.root / rel, text)
        return rel

    def add_rank(self, record: RankRecord) -> None:
        self.manifest.ranks.append(record)

    def add_host(self, record: HostRecord) -> None:
        self.manifest.hosts.append(record)

    def add_missing(self, missing: MissingRank) -> None:
        self.manifest.missing.append(missing)

    def add_artifact(self, artifact: JobArtifact) -> None:
        self.manifest.artifacts.append(artifact)

    def note(self, text: str) -> None:
        self.manifest.notes.append(text)

    def save(self) -> Path:
        """Write manifest.json atomically; safe to call many times."""
        return self._write(self.manifest)

    def snapshot(self, note: str) -> Path:
        """Write manifest.json as the collection stands, ranks still in progress included with the
        collectors they finished: what a collection cut short at its deadline can still hand over."""
        done = {id(r) for r in self.manifest.ranks}
        ranks = list(self.manifest.ranks) + [r for r in list(self.in_progress) if id(r) not in done]
        partial = dataclasses.replace(self.manifest, ranks=ranks, notes=[*self.manifest.notes, note])
        return self._write(partial)

    def _write(self, manifest: Manifest) -> Path:
        return write_manifest(self.root, manifest)


def write_manifest(root: Path, manifest: Manifest) -> Path:
    """ROOT/manifest.json, written atomically (a new temp file, O_EXCL|O_NOFOLLOW, then a rename, which
    replaces the name and never writes through a link): a reader never sees half of it."""
    path = Path(root) / MANIFEST_NAME
    # indented for people while small; one line when large: json writes indented JSON in pure Python, and
    # for a 4,096-host job's manifest that alone was ~2.5 s of the merge here against ~0.2 s in C
    indent = 1 if len(manifest.ranks) + len(manifest.hosts) <= INDENT_UP_TO else None
    safefs.replace_file(path, to_json(manifest, indent) + "\n")
    return path
