"""The bundle: a directory (or tar archive) of evidence with a versioned manifest.json.

The format is documented in docs/architecture.md. `manifest` defines it, `writer`
fills it during collection, `reader` opens and validates it for analysis.
"""

from parsers.model.manifest import (
    FORMAT,
    VERSION,
    CollectorRecord,
    HostRecord,
    Manifest,
    MissingRank,
    RankRecord,
    Status,
)

__all__ = [
    "FORMAT",
    "VERSION",
    "CollectorRecord",
    "HostRecord",
    "Manifest",
    "MissingRank",
    "RankRecord",
    "Status",
]
