"""Files the caller hands to `collect --attach`: copied into the bundle and listed in its manifest.

Why: some evidence no collector can find on its own, but the caller holds it: forensics.arm()'s
step series of every rank (rank 0 read them all from the job's store when it raised a straggler
alarm), a training log kept on other storage. A bundle's reader reads the files its manifest
lists, so an attached file is listed as a job-level artifact and then read like any other (the
registry recognises it by content). Bounded and confined like every copy: regular files only,
no links followed, at most MAX_FILES of MAX_BYTES each, names made safe.
"""

from __future__ import annotations

import json
from pathlib import Path

from forensics.bundle.writer import safe_name, unique_name, write_manifest
from parsers.model.manifest import MANIFEST_NAME, JobArtifact, manifest_from_dict
from forensics import safefs
from forensics.errors import ForensicsError
from parsers.input.safeio import UnsafeFile, open_regular

#: folder of attached files, inside the bundle
ATTACHED = "job/attached"
MAX_FILES = 256
MAX_BYTES = 64 * 1024 * 1024


def attach_files(bundle: Path, paths: list[Path], host: str | None = None) -> list[str]:
    """Copy `paths` into BUNDLE/job/attached and list them in its manifest; the problems, one line each.

    A file that cannot be attached (missing, a link, not regular, over the bounds) is a problem
    line, never an exception: the bundle already gathered stays as it is."""
    problems: list[str] = []
    if len(paths) > MAX_FILES:
        problems.append(f"--attach: {len(paths)} files given, the first {MAX_FILES} attached")
        paths = paths[:MAX_FILES]
    added: list[JobArtifact] = []
    used: set[str] = set()
    for path in paths:
        rel = f"{ATTACHED}/{unique_name(safe_name(Path(path).name), used)}"
        try:
            with open_regular(path, follow=False) as fh:
                safefs.make_dirs(bundle, ATTACHED)
                _, cut = safefs.copy_from(fh, bundle / rel, MAX_BYTES, tail=True)  # new file, no link followed
        except (UnsafeFile, OSError, ForensicsError) as err:
            problems.append(f"--attach {path}: not attached ({getattr(err, 'strerror', None) or err})")
            continue
        if cut:
            problems.append(f"--attach {path}: larger than {MAX_BYTES >> 20} MiB, its last "
                            f"{MAX_BYTES >> 20} MiB attached")
        added.append(JobArtifact(kind="attached", path=rel, host=host))
    if added:
        _list_in_manifest(bundle, added)
    return problems


def _list_in_manifest(bundle: Path, added: list[JobArtifact]) -> None:
    """Append the artifacts to the bundle's manifest, rewritten as the writer writes it."""
    manifest = manifest_from_dict(json.loads((bundle / MANIFEST_NAME).read_text()))
    manifest.artifacts.extend(added)
    write_manifest(bundle, manifest)
