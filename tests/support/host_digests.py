"""A copy of a bundle with each host's digest made as collect makes it (digest_host): what a fleet's host sends.

One helper for the tests of the merged digest and of tree mode's reduction, which file such copies as hosts.
"""

from __future__ import annotations

import shutil
from pathlib import Path

from parsers import knowledge
from parsers.gather.source import open_source
from parsers.scale.digest import DIGEST_NAME, write_json
from parsers.scale.digest_first import digest_host

KB = knowledge.load(use_env=False)


def with_digests(src_bundle: Path, dst: Path) -> Path:
    """`src_bundle` copied to `dst`, each of its hosts' digest written in that host's folder; `dst`."""
    shutil.copytree(src_bundle, dst, symlinks=True)
    with open_source(dst) as src:
        for rec in src.manifest.hosts:
            (dst / rec.dir / DIGEST_NAME).write_bytes(write_json(digest_host(src, rec.host, KB)))
    return dst
