"""Issue 40 item 9, a full disk: every `-o FILE` writer (hosts, analyze, report, text and JSON) on a real
tmpfs filled to the last byte ends with one error line naming the OS's reason, exit 2, and leaves neither a
partial FILE nor a temp file; a FILE that was there before stays as it was (nothing lost)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from hf_testpaths import FIXTURES, REPO

pytestmark = pytest.mark.integration  # real processes and a real mount

BUNDLE = FIXTURES / "nccl" / "sigstop" / "bundle"
ENV = {**os.environ, "PYTHONPATH": str(REPO)}
BEFORE = "the file that was here before\n"
COMMANDS = {
    "hosts": ["hosts", str(BUNDLE)],
    "hosts --json": ["hosts", str(BUNDLE), "--json"],
    "analyze": ["analyze", str(BUNDLE)],
    "analyze --json": ["analyze", str(BUNDLE), "--json"],
    "report": ["report", str(BUNDLE)],
}


@pytest.fixture
def full_disk(tmp_path: Path):
    """A real 256 KiB tmpfs, filled by one file until the kernel says ENOSPC; unmounted afterwards."""
    mnt = tmp_path / "full"
    mnt.mkdir()
    if os.geteuid() != 0 or not shutil.which("mount"):
        pytest.skip("needs root to mount a tmpfs")
    done = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=256k,mode=0755", "tmpfs", str(mnt)],
                          capture_output=True, text=True)
    if done.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {done.stderr.strip()}")
    try:
        (mnt / "before.txt").write_text(BEFORE)
        fd = os.open(mnt / "filler", os.O_WRONLY | os.O_CREAT, 0o600)
        try:
            with pytest.raises(OSError, match="No space"):
                while True:
                    os.write(fd, b"\0" * 512)
        finally:
            os.close(fd)
        yield mnt
    finally:
        subprocess.run(["umount", "-l", str(mnt)], capture_output=True)


@pytest.mark.parametrize("what", sorted(COMMANDS))
def test_full_disk_leaves_no_partial_or_temp_file(full_disk: Path, what: str):
    names = ("new.out",) if what == "report" else ("new.out", "before.txt")  # report -o never replaces a file
    for name in names:
        target = full_disk / name
        run = subprocess.run([sys.executable, "-m", "forensics", *COMMANDS[what], "-o", str(target)],
                             capture_output=True, text=True, env=ENV, timeout=180)
        lines = [line for line in run.stderr.splitlines() if line.strip()]
        assert "Traceback" not in run.stderr, run.stderr
        # verbatim input: the OS's own message for ENOSPC
        assert len(lines) == 1 and "No space left on device" in lines[0], (what, run.stderr)
        assert run.returncode == 2, (what, run.returncode)
        assert sorted(p.name for p in full_disk.iterdir()) == ["before.txt", "filler"], (what, name)
    assert (full_disk / "before.txt").read_text() == BEFORE
