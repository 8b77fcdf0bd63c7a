"""A folder outside pytest's tmp_path, for tests that act as another user (root's tmp_path sits in a 0700
folder no other user can reach)."""

from __future__ import annotations

import shutil
import tempfile
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator


@contextmanager
def open_dir(prefix: str, mode: int) -> Iterator[Path]:
    """A new folder under the system temp folder with `mode` (0o755: others may read; 0o1777: like /tmp),
    removed with all it holds on exit."""
    path = Path(tempfile.mkdtemp(prefix=prefix))
    try:
        path.chmod(mode)
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)
