"""A throwaway unprivileged user for root-run tests that need "another user" (issue 40): made with
useradd, removed with userdel. Skips the test when not root or when the tools are missing."""

from __future__ import annotations

import os
import pwd
import shutil
import subprocess
import uuid
from collections.abc import Iterator
from contextlib import contextmanager

import pytest


@contextmanager
def throwaway_user(prefix: str = "hf40") -> Iterator[tuple[int, int, str]]:
    """(uid, gid, name) of a new system user with no home and no shell; removed on exit."""
    if os.geteuid() != 0:
        pytest.skip("needs root: the case is a root forensics against another user")
    missing = [t for t in ("useradd", "userdel") if not shutil.which(t)]
    if missing:
        pytest.skip(f"needs {', '.join(missing)}")
    name = f"{prefix}{uuid.uuid4().hex[:8]}"
    made = subprocess.run(["useradd", "--system", "--no-create-home", "--shell", "/usr/sbin/nologin", name],
                          capture_output=True, text=True)
    if made.returncode != 0:
        pytest.skip(f"cannot create a throwaway user: {made.stderr.strip()}")
    try:
        ent = pwd.getpwnam(name)
        yield ent.pw_uid, ent.pw_gid, name
    finally:
        subprocess.run(["userdel", name], capture_output=True)
