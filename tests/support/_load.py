"""The one place the real-world tests load a corpus file: through the reader registry, as a loose file."""

from __future__ import annotations

from pathlib import Path

from parsers.gather.evidence import load_files


def load(path: Path) -> list:
    """Parsed results (parsers.model.events.Parsed) of one excerpt, read as a user's loose file."""
    loaded = load_files([(path, {})])
    return [art.parsed for art in loaded.artifacts if art.parsed is not None]
