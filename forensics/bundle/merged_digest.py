"""A bundle's merged digest: its hosts' digests folded into one class summary, written at the bundle's root.

Why one place: the fleet's merge writes it (`write_merged_digest`, at the end of every flat collection, and so of
each gateway's of the reduced tree), a gateway answers it to the root, and `python -m forensics.fleet.reduce`
makes it again where that file is not there (forensics.fleet.reduce.reduce_bundle). Those were two loops over the
hosts that had drifted (one checked that a host's digest speaks for its own processes only, the other did not);
`merge_host_digests` is now the one that reads the hosts' rank summaries and merges them with the model's one
merge (parsers.model.summaries: ClassSummary).

Kept apart from the host's digest (forensics.bundle.digest, which runs the readers, the judges and the knowledge
base on the host): a gateway imports this module, and starts without them.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Iterable, Iterator, NamedTuple

from parsers.scale.digest import DIGEST_NAME, DigestError, StatedJob, read_summaries
from parsers.scale.merge import ClassSummary, from_host, merge_all, without as without_digest
from parsers.model.manifest import HostRecord, Manifest
from parsers.gather.source import confine
from parsers.input.errors import InputError
from forensics import safefs

MERGED_DIGEST = "merged-digest.json"


class HostsMerged(NamedTuple):
    """A bundle's host digests merged (`merge_host_digests`)."""

    summary: ClassSummary  #: their class summary; hosts with files and no usable digest named in its without_digest
    read: int  #: host digests merged
    refused: list[str]  #: each digest that was there and refused: "host (why)"


def merge_host_digests(root: Path, hosts: Iterable[HostRecord], job: StatedJob) -> HostsMerged:
    """The hosts' digests of the bundle at `root` merged: each host's rank summaries (`read_summaries`: the files'
    evidence, nine tenths of a digest, is no part of the classes) speaking for its own processes only, within the
    job's size (`job`: what the manifest states), folded by the model's one merge. One digest is read at a time:
    memory holds the merge only.

    A host whose folder holds files and no usable digest is named in `without_digest` (its ranks are then in no
    class: the root judges rank by rank); a digest that is there and refused (damaged, hostile) is said, with why,
    in `refused`, and the other hosts still merge. A host that sent nothing (no folder) has no ranks to judge."""
    refused: list[str] = []
    without: list[str] = []
    read = 0

    def parts() -> Iterator[ClassSummary]:
        nonlocal read
        for rec in hosts:
            if not rec.dir:
                continue
            try:
                folder = confine(root, rec.dir.rstrip("/"))
                path = folder / DIGEST_NAME
                if not os.path.lexists(path):
                    if folder.is_dir():  # files without a digest: its ranks are in no class (counted as dropped)
                        without.append(rec.host)
                    continue
                dig = read_summaries(path, job.own(rec.host), job.world)
            except (DigestError, InputError) as err:  # a manifest path that leads outside is refused as well
                refused.append(f"{rec.host} ({err})")
                without.append(rec.host)
                continue
            read += 1
            yield from_host(rec.host, dig.ranks, dig.host_findings)

    merged = merge_all(parts())
    return HostsMerged(without_digest(merged, without), read, refused)


def write_merged_digest(root: Path, man: Manifest) -> str | None:
    """The bundle's merged digest (`merge_host_digests`) written at its root: stack classes with rank ranges,
    per-communicator position histograms, edges, exceptions, exits. Returns a note when some host's digest was
    unusable (None when all were, or there were none); no file when no host's digest was read."""
    merged = merge_host_digests(root, man.hosts, StatedJob.of(man))
    bad = list(merged.refused)
    if merged.read:
        try:
            safefs.replace_file(root / MERGED_DIGEST, json.dumps(merged.summary.to_json(), separators=(",", ":")))
        except Exception as err:  # noqa: BLE001 - an index: never lose the merged bundle over it
            bad.append(f"{MERGED_DIGEST} not written ({type(err).__name__}: {str(err)[:300]})")
    return f"host digests not merged: {'; '.join(bad[:20])}" if bad else None
