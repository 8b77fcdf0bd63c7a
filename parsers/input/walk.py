"""Walking a folder tree iteratively, with a depth bound that says what it cut.

Why its own module: `Path.rglob` and a recursive walk take one Python frame per folder level, so a
folder nested 1,000 deep (anyone can make one under /tmp, or ship one in an archive) ended a command
with RecursionError. Here the folders still to visit are a list; a folder deeper than the bound is not
entered and is named in `cut`, so the caller can say what it did not read.

Pure, and ground floor (nothing above parsers/).
"""

from __future__ import annotations

import fnmatch
import os
from pathlib import Path
from typing import Iterator

MAX_WALK_DEPTH = 32  #: folder levels below the root that are entered (a bundle uses 4-5)


def walk_files(root: Path, pattern: str = "*", max_depth: int = MAX_WALK_DEPTH,
               cut: list[str] | None = None, folders: bool = False) -> Iterator[Path]:
    """Regular files under `root` whose name matches `pattern` (and with `folders`, the folders too),
    in name order, never following a link. A folder past `max_depth`, or one that cannot be listed, is
    not entered and is said in `cut` ("PATH: why")."""
    todo: list[tuple[Path, int]] = [(Path(root), 0)]
    while todo:
        folder, depth = todo.pop()
        try:
            with os.scandir(folder) as it:
                entries = sorted(it, key=lambda e: e.name)
        except OSError as err:
            _note(cut, f"{folder}: cannot be listed ({err.strerror or err})")
            continue
        below: list[Path] = []
        for entry in entries:
            path = Path(entry.path)
            if entry.is_dir(follow_symlinks=False):
                if depth + 1 > max_depth:
                    _note(cut, f"{path}: deeper than {max_depth} folders, not read")
                    continue
                below.append(path)
                if folders:
                    yield path
            elif entry.is_file(follow_symlinks=False) and fnmatch.fnmatchcase(entry.name, pattern):
                yield path
        todo.extend((path, depth + 1) for path in reversed(below))


def has_files(root: Path, max_depth: int = MAX_WALK_DEPTH) -> bool:
    """Whether any regular file lies under `root`, within `max_depth` folder levels."""
    return next(walk_files(root, max_depth=max_depth), None) is not None


def _note(cut: list[str] | None, text: str) -> None:
    if cut is not None and len(cut) < 1000:
        cut.append(text)
