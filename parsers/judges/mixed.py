"""Inputs from another job: files given beside a bundle whose own words say they are not its ranks'.

Why: `forensics analyze BUNDLE extra.log` merges every file into one verdict. A log of another job (its
ranks' pids, its world size, its host, its Slurm job id) would then make ranks 'absent' or 'agree' with a
culprit it never saw. The bundle's manifest says which processes the job has; a loose file that states a
world size, a pid, a host, a rank or a job id outside those is evidence of another job, and the verdict
says so (typed here, worded in forensics/report/words/mixed.py) instead of merging it in silence.
Pure: reads the evidence only.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from parsers.evidence import Evidence

#: why a file is another job's, in the order said
WORLD, PID, HOST, RANK, JOB = "world-size", "pid", "host", "rank", "job-id"


@dataclass(frozen=True)
class ForeignInput:
    """A file that its own words place in another job, and what says so (name, the file's value, the bundle's)."""

    file: str
    reasons: tuple[tuple[str, Any, Any], ...]

    def to_dict(self) -> dict[str, Any]:
        return {"file": self.file, "reasons": [{"what": w, "file_says": f, "bundle_says": b} for w, f, b in self.reasons]}


def _bundle_identity(ev: Evidence) -> dict[str, set]:
    ranks = ev.manifest.ranks if ev.manifest is not None else []
    return {WORLD: {r.world_size for r in ranks if r.world_size}, PID: {r.pid for r in ranks if r.pid},
            HOST: {r.host for r in ranks if r.host}, JOB: {getattr(r, "job_id", None) for r in ranks} - {None}}


def _reasons(facts: dict[str, Any], known: dict[str, set]) -> list[tuple[str, Any, Any]]:
    out = []
    for what, key in ((WORLD, "world_size"), (PID, "pid"), (HOST, "host"), (JOB, "job_id")):
        value = facts.get(key)
        if value is not None and known[what] and value not in known[what]:
            out.append((what, value, sorted(known[what], key=str)))
    rank, world = facts.get("rank"), max(known[WORLD], default=None)
    if isinstance(rank, int) and world and not 0 <= rank < world:
        out.append((RANK, rank, world))
    return out


def foreign_inputs(ev: Evidence) -> list[ForeignInput]:
    """Files given beside a bundle (not listed in its manifest) whose stated identity is not the bundle's job.
    A pid or a host alone is not enough (a bundle of one host plus the other hosts' logs is one job; a rank's log
    written by a child names another pid): a file is another job's when its world size or job id disagrees or
    its rank lies outside the job, the pid and host adding to the reasons."""
    if ev.manifest is None or not ev.manifest.ranks:
        return []
    known = _bundle_identity(ev)
    out = []
    for art in ev.artifacts:
        if art.hints.from_manifest or art.parsed is None:
            continue
        reasons = _reasons(art.parsed.facts, known)
        if any(what in (WORLD, JOB, RANK) for what, _f, _b in reasons):
            out.append(ForeignInput(art.rel or str(art.path), tuple(reasons)))
    return out
