"""`load(path)`: a bundle folder or archive, or (through a hook) a folder of loose artifacts.

Bundles are analysed here with parsers.analyze. A folder of loose artifacts (NCCL
logs, Flight Recorder dumps, stderr files with no manifest) needs the log readers
and their correlation: whichever module provides them registers a loader with
`register_loose_loader`, and `load` hands such folders to it. Without one, the
user gets a clear error rather than a guess.
"""

from __future__ import annotations

from pathlib import Path
from typing import Callable

from forensics.bundle.reader import is_bundle, open_bundle
from forensics.errors import ForensicsError
from forensics.postmortem.session import PostMortem
from forensics.postmortem.waitfor import correlated_graph
from parsers.analyze import analyze_bundle

_LOOSE_LOADERS: list[Callable[[Path], PostMortem]] = []


def register_loose_loader(loader: Callable[[Path], PostMortem]) -> None:
    """Add a loader for folders that are not bundles; it returns a PostMortem or raises ForensicsError."""
    if loader not in _LOOSE_LOADERS:
        _LOOSE_LOADERS.append(loader)


def load(path: str | Path) -> PostMortem:
    """Load a bundle (folder or .tar.gz) and analyse it; raises ForensicsError on bad input."""
    path = Path(path).expanduser()
    if not path.exists():
        raise ForensicsError(f"{path}: no such file or directory")
    if is_bundle(path):
        return from_bundle(path)
    if path.is_dir() and _LOOSE_LOADERS:
        errors = []
        for loader in _LOOSE_LOADERS:
            try:
                return loader(path)
            except ForensicsError as err:
                errors.append(str(err))
        raise ForensicsError(f"{path}: no loader could read this folder: " + "; ".join(errors))
    raise ForensicsError(f"{path}: not a bundle (no manifest.json); make one with 'forensics collect' or 'forensics demo'")


def from_bundle(path: str | Path) -> PostMortem:
    """Open and analyse a bundle."""
    bundle = open_bundle(path)
    verdict, evidence = analyze_bundle(bundle)
    return PostMortem(verdict, source=str(path), evidence=evidence, graph=correlated_graph(bundle, verdict))
