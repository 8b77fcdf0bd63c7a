"""Opens a bundle for the collection side (merging fleet parts, checking what `collect` wrote).

The analysis side opens any source (bundle, loose folder, archive) with
parsers.gather.source.open_source; this is the same opener with one more rule: the
folder must have a manifest. Bad input becomes a ForensicsError with what to do.
"""

from __future__ import annotations

from pathlib import Path

from forensics.errors import ForensicsError
from parsers.input.errors import InputError
from parsers.model.manifest import MANIFEST_NAME
from parsers.gather.source import Source, manifest_refusal, open_source


def open_bundle(path: Path | str) -> Source:
    """Open and validate a bundle folder or archive; ForensicsError when it is not one."""
    try:
        src = open_source(path)
    except InputError as err:
        raise ForensicsError(str(err)) from err
    if src.manifest is None:
        src.close()
        refused = manifest_refusal(src.skipped)
        if refused is not None:  # a bundle is wanted here: its manifest's fault, not a loose folder
            raise ForensicsError(f"{path}: {refused}")
        raise ForensicsError(f"{path}: not a bundle (no {MANIFEST_NAME}); pass a folder written by 'forensics collect'")
    return src
