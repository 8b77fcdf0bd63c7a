"""Loads what a bundle says about each rank into one RankEvidence per process.

A reader that fails on one file records the problem and moves on: a damaged file
is missing evidence, not a reason to stop the analysis.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import cached_property
from typing import Any

from forensics.bundle.manifest import MissingRank, RankRecord, Status
from forensics.bundle.reader import Bundle
from parsers.model import ThreadStack
from parsers.readers.gdb import read_gdb_json
from parsers.readers.launcher import RankExit, read_launcher_json
from parsers.readers.proc import read_proc_json
from parsers.readers.pyspy import PySpyFormatError, read_pyspy_json
from parsers.stacks.classify import Activity, classify


@dataclass
class RankEvidence:
    record: RankRecord
    proc: dict[str, Any] | None = None
    pyspy: list[ThreadStack] = field(default_factory=list)
    gdb: list[ThreadStack] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)

    @property
    def rank(self) -> int | None:
        return self.record.rank

    @property
    def state(self) -> str | None:
        """State letter before collection (the state the hang put it in)."""
        return self.record.state_before or (self.proc or {}).get("state")

    @cached_property
    def main_stack(self) -> ThreadStack | None:
        """Main thread: py-spy's (Python frames) when present, else gdb's."""
        for threads in (self.pyspy, self.gdb):
            main = next((t for t in threads if t.is_main), None)
            if main and main.frames:
                return main
        return None

    @cached_property
    def activity(self) -> Activity:
        return classify(self.main_stack)


@dataclass
class BundleEvidence:
    ranks: list[RankEvidence]
    missing: list[MissingRank]
    exits: list[RankExit]
    problems: list[str]


def load_evidence(bundle: Bundle) -> BundleEvidence:
    ranks = [_load_rank(bundle, rec) for rec in bundle.manifest.ranks]
    exits: list[RankExit] = []
    problems: list[str] = []
    for art in bundle.manifest.artifacts:
        if art.kind == "launcher":
            try:
                exits.extend(read_launcher_json(bundle.path(art.path)))
            except (OSError, ValueError, KeyError, TypeError) as err:
                problems.append(f"launcher record {art.path}: unreadable ({err})")
    return BundleEvidence(ranks=ranks, missing=list(bundle.manifest.missing), exits=exits, problems=problems)


def _load_rank(bundle: Bundle, rec: RankRecord) -> RankEvidence:
    ev = RankEvidence(record=rec)
    for name, loader, attr in (
        ("process_state", read_proc_json, "proc"),
        ("py-spy", lambda p: read_pyspy_json(p, rec.pid), "pyspy"),
        ("gdb", lambda p: read_gdb_json(p, rec.pid), "gdb"),
    ):
        col = rec.collector(name)
        if col is None or col.status == Status.SKIPPED:
            continue
        if col.status != Status.OK:
            ev.problems.append(f"{name}: {col.status}" + (f" ({col.error})" if col.error else ""))
            continue
        for path in bundle.rank_files(rec, name):
            if not path.name.endswith(".json"):
                continue
            try:
                setattr(ev, attr, loader(path))
            except (OSError, ValueError, PySpyFormatError, KeyError, TypeError) as err:
                ev.problems.append(f"{name}: {path.name} unreadable ({err})")
    return ev
