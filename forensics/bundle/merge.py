"""Merges per-host bundles into one job bundle, and records the hosts that gave none.

Each host's bundle is re-rooted under hosts/<host>/ (the name the fleet reached it by),
so two hosts that call themselves the same (containers, tests on one machine) cannot
clash. Every path in the manifest is rewritten the same way. A rank one host lists as
missing but another host collected is not missing. Ranks of the job that no answering
host had are listed as missing, with the reason saying whether a host was silent.
"""

from __future__ import annotations

import os
import shutil
import stat
from dataclasses import dataclass
from pathlib import Path

from parsers.model.manifest import MANIFEST_NAME, JobArtifact, HostRecord, Manifest, MissingRank, Status
from forensics import safefs
from forensics.bundle.merged_digest import write_merged_digest
from parsers.scale.merge import difference, ranks_of
from forensics.bundle.reader import open_bundle
from forensics.bundle.writer import BundleWriter, safe_name
from parsers.input import safeio
from parsers.input.archive import name_parts
from parsers.input.manifest_schema import MAX_WORLD
from forensics.errors import ForensicsError
from forensics.hostset import HostSetError, fold

#: host statuses that mean "we do not know what ran there" (see forensics.fleet.outcome)
SILENT = ("unreachable", "timeout", "failed")
MAX_FILES_PER_HOST = 200_000  #: files copied from one host's bundle
MAX_FILE_BYTES = 1 << 30  #: bytes of one file of a host bundle (collectors cap theirs far lower)
MAX_ADDED_MISSING = 100_000  #: ranks the merge may add as missing, whatever world_size says
HOST_MANIFEST = "host-manifest.json"  #: a host's own manifest, kept in its folder of the job bundle


@dataclass
class HostPart:
    """One host's contribution: the bundle folder it sent, or why there is none."""

    host: str
    bundle: Path | None = None
    status: str = Status.OK
    error: str | None = None
    seconds: float = 0.0
    #: set when the host's files were already filed under hosts/<host>/ of the job bundle (the fleet
    #: extracts each archive there as it arrives, see place_archive): the merge then copies nothing
    placed: Manifest | None = None


def merge_bundles(out: Path, parts: list[HostPart], command: list[str] | None = None,
                  collected_elsewhere: list[list[int]] | None = None) -> Manifest:
    """Write the job bundle at `out` from `parts`; returns its manifest (also saved). `collected_elsewhere`:
    job ranks as sorted [lo, hi] ranges that were collected and are kept elsewhere (the reduced tree's gateways),
    never listed as missing: at 100,000 ranks the root would otherwise list, write and then drop 99,992 of them."""
    writer = BundleWriter(out, command=command)
    for part in parts:
        if part.bundle is None:
            writer.add_host(HostRecord(host=part.host, status=part.status, seconds=part.seconds, error=part.error))
            continue
        try:
            _merge_one(writer, part)
        except Exception as err:  # noqa: BLE001 - one host's broken bundle must never lose the others
            if part.placed is not None:
                shutil.rmtree(out / host_root(part.host), ignore_errors=True)
            error = f"its bundle could not be merged: {err}"
            writer.add_host(HostRecord(host=part.host, status="failed", seconds=part.seconds, error=error))
            writer.note(f"{part.host}: {error}")
    _settle_missing(writer.manifest, parts, collected_elsewhere or [])
    if note := write_merged_digest(writer.root, writer.manifest):  # the hosts' digests folded into one (issue 30)
        writer.note(note)
    writer.save()
    return writer.manifest


def _rebase(rel: str, host_root: str) -> str:
    """Map a path of a host bundle into the job bundle: hosts/<any>/x -> hosts/<host>/x, y -> hosts/<host>/_bundle/y."""
    parts = name_parts(rel)  # Path(rel).parts without its cost (49k names a 4,096-host merge)
    if len(parts) >= 2 and parts[0] == "hosts":
        return "/".join((host_root, *parts[2:]))
    return "/".join((host_root, "_bundle", *parts))


def host_root(host: str) -> str:
    """The folder of one host's evidence in the job bundle."""
    return f"hosts/{safe_name(host)}"


def place_name(rel: str, root: str) -> str:
    """Where file `rel` of a host bundle goes in the job bundle; its manifest is kept aside as host-manifest.json."""
    return f"{root}/{HOST_MANIFEST}" if rel == MANIFEST_NAME else _rebase(rel, root)


def _merge_one(writer: BundleWriter, part: HostPart) -> None:
    """Add one host's bundle; raises (before touching the writer's manifest) when it is unreadable."""
    root = host_root(part.host)
    if part.placed is not None:
        man = part.placed
    else:
        source = open_bundle(part.bundle)
        man = source.manifest
        _copy_tree(source.root, writer.root, root)
    rebase = lambda rel: _rebase(rel, root)  # noqa: E731 - one-line mapping used below
    names = {h.host for h in man.hosts} | {r.host for r in man.ranks}
    for other in sorted(n for n in names if n != part.host):
        writer.note(f"{part.host}: the host calls itself {other!r}; its evidence is filed under {part.host}")
    host_records = man.hosts or [HostRecord(host=part.host)]
    for rec in host_records:
        rec.host = part.host
        rec.dir = rebase(rec.dir) if rec.dir else root
        rec.status = part.status
        rec.error = part.error
        rec.seconds = part.seconds or rec.seconds
        for col in rec.collectors:
            col.files = [rebase(f) for f in col.files]
        writer.add_host(rec)
    for rank in man.ranks:
        rank.host = part.host
        rank.dir = rebase(rank.dir)
        for col in rank.collectors:
            col.files = [rebase(f) for f in col.files]
        writer.add_rank(rank)
    for miss in man.missing:
        miss.host = part.host
        writer.add_missing(miss)
    for art in man.artifacts:
        writer.add_artifact(JobArtifact(kind=art.kind, path=rebase(art.path), host=part.host, rank=art.rank))
    for note in man.notes:
        writer.note(f"{part.host}: {note}")


def _copy_tree(src: Path, dest_root: Path, rel_root: str) -> None:
    """Copy every file of a host bundle to its rebased place (no links followed, manifest kept aside)."""
    for path in safeio.walk_files(src, max_files=MAX_FILES_PER_HOST):
        rel = path.relative_to(src).as_posix()
        target = dest_root / place_name(rel, rel_root)
        try:
            with safeio.open_regular(path, follow=False) as fh:
                safefs.ensure_folder(target.parent)  # the one checked writer (issue 40): new file, no link followed
                safefs.copy_from(fh, target, MAX_FILE_BYTES, tail=False,
                                 mode=stat.S_IMODE(os.fstat(fh.fileno()).st_mode) & 0o640)
        except (OSError, ForensicsError):
            continue  # a FIFO, a link, a vanished file or a name given twice in a host bundle is not evidence


def _settle_missing(man: Manifest, parts: list[HostPart], elsewhere: list[list[int]]) -> None:
    """Drop 'missing' ranks another host collected; add ranks of the job that no host had, except those
    collected `elsewhere` (sorted [lo, hi] ranges)."""
    present = {(r.job_id, r.rank) for r in man.ranks if r.rank is not None}
    present_ranks = {rank for _, rank in present}
    kept: dict[tuple[str | None, int], MissingRank] = {}
    for miss in man.missing:
        if (miss.job_id, miss.rank) in present or (miss.job_id is None and miss.rank in present_ranks):
            continue
        kept.setdefault((miss.job_id, miss.rank), miss)
    silent = [p.host for p in parts if p.bundle is None and p.status in SILENT]
    heard_not = _folded(silent)  # once, folded: 2,000 silent hosts must not be spelled out in every reason
    worlds: dict[str | None, int] = {}
    for rank in man.ranks:
        if rank.world_size:
            worlds[rank.job_id] = max(worlds.get(rank.job_id, 0), rank.world_size)
    added = 0
    for job_id, world in worlds.items():
        for number in ranks_of(difference([[0, min(world, MAX_WORLD) - 1]], elsewhere)):
            if (job_id, number) in present or (job_id, number) in kept:
                continue
            added += 1
            if added > MAX_ADDED_MISSING:
                man.notes.append(f"job {job_id}: more than {MAX_ADDED_MISSING} ranks of {world} have no process; "
                                 "only the first are listed as missing")
                break
            reason = "no process found on any host that answered"
            if silent:
                reason += f"; not heard from: {heard_not}"
            kept[(job_id, number)] = MissingRank(rank=number, reason=reason, host=None, job_id=job_id)
    man.missing = sorted(kept.values(), key=lambda m: (m.job_id or "", m.rank))


def _folded(hosts: list[str]) -> str:
    """'node[0001-2000]' for a host list; names NodeSet cannot fold are listed (at most 20, then a count)."""
    try:
        return fold(hosts)
    except HostSetError:
        shown = ", ".join(hosts[:20])
        return shown + (f" and {len(hosts) - 20} more" if len(hosts) > 20 else "")


def silent_host_record(host: str, status: str, seconds: float, error: str) -> HostPart:
    """A host that sent no bundle: 'unreachable', 'timeout' or 'failed', with the human reason."""
    return HostPart(host=host, bundle=None, status=status, error=error, seconds=seconds)
