"""The one place the real-world tests load a corpus file: the lead rewires it to the registry here."""

from __future__ import annotations

from pathlib import Path

from parsers.artifacts import load_files


def load(path: Path) -> list:
    """Parsed results (parsers.events.Parsed) of one excerpt, read as a user's loose file."""
    loaded = load_files([(path, {})])
    return [art.parsed for art in loaded.artifacts if art.parsed is not None]
