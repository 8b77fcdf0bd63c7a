"""Writes a host's digest beside its raw files at the end of `collect` (the format: parsers/scale/digest.py).

Why on the host: the host already has its files, and reading them there (with the readers analysis
uses) spreads the reading of a 100,000-rank job over its hosts; analysis then reads one small file
a host and the raw files of the odd ones out only (parsers/scale/digest_first.py). A digest that cannot
be made costs nothing gathered: the raw files and the manifest stay as they are, and a note says why.
The hosts' digests merged into the bundle's one: forensics/bundle/merged_digest.py.
"""

from __future__ import annotations

import datetime as _dt
from pathlib import Path
from typing import Callable

from parsers import knowledge
from parsers.scale.digest import DIGEST_NAME, write_json
from parsers.scale.digest_first import digest_host
from parsers.gather.source import open_source
from forensics import safefs
from forensics.bundle.writer import BundleWriter


def write_host_digest(writer: BundleWriter, host: str, save: Callable[[Path, str], str | None] | None = None
                      ) -> str | None:
    """Read `host`'s files of the bundle back through the readers and write <host dir>/digest.json; returns a
    note for the manifest when it could not (None when written). The manifest must be saved. `save(path, text)`
    writes it and returns why it did not (collect's: whole within the host's byte cap or not at all); by default
    it replaces the file, uncapped."""
    try:
        with open_source(writer.root) as src:
            rec = next((h for h in src.manifest.hosts if h.host == host), None) if src.manifest else None
            if rec is None or not rec.dir:
                return f"host digest not written: {host} has no folder in the manifest; analysis reads the raw files"
            created = _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds")
            doc = digest_host(src, host, knowledge.load(use_env=False), created)
        cut = (save or _replace)(writer.root / rec.dir / DIGEST_NAME, write_json(doc))
        if cut:
            return f"host digest not written ({cut}); analysis reads the raw files"
    except Exception as err:  # noqa: BLE001 - the digest is an index: never lose a collection over it
        return f"host digest not written ({type(err).__name__}: {str(err)[:300]}); analysis reads the raw files"
    return None


def _replace(path: Path, text: str) -> None:
    safefs.replace_file(path, text)
