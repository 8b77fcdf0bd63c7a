"""The bundle: a directory (or tar archive) of evidence with a versioned manifest.json.

The format is documented in docs/architecture.md. Its records and their reading live in the
model (parsers/model/manifest.py, checked against parsers/input/manifest_schema.py); here is the
writing side: `writer` fills the manifest during collection, `encode` writes records as JSON,
`redact` keeps secrets out of what is written; `reader` opens a bundle for the collection side.
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
