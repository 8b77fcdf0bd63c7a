"""Issue 40 item 7: every string from a target's data that `collect` prints goes through the one escape of the
text outputs (forensics.report.text.escape, via `emit` and the progress lines). Reproducer: a real rank whose
NCCL_DEBUG_FILE names a missing file with an OSC title sequence (ESC ] 0 ; ... BEL), a C1 CSI (U+009B) and a
raw 0x9b byte (not UTF-8); the missing-evidence line must show them escaped, in the summary and in progress."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from hf_testpaths import REPO

pytestmark = pytest.mark.integration

RAW = (b"\x1b", b"\x07", b"\xc2\x9b", b"\x9b")  # ESC, BEL, C1 CSI as UTF-8, a lone 0x9b byte


@pytest.fixture
def rank(tmp_path: Path):
    hostile = os.fsencode(tmp_path) + b"/nccl-\x1b]0;owned\x07-\xc2\x9b2J-\x9b31m.log"
    env = {b"PATH": os.environ["PATH"].encode(), b"RANK": b"0", b"WORLD_SIZE": b"1", b"LOCAL_RANK": b"0",
           b"NCCL_DEBUG": b"INFO", b"NCCL_DEBUG_FILE": hostile}
    out = tmp_path / "rank0.out"
    with open(out, "w") as fh:
        proc = subprocess.Popen([sys.executable, "-c", "import time; print('ready', flush=True); time.sleep(300)"],
                                env=env, stdout=fh, stderr=subprocess.STDOUT)
    deadline = time.monotonic() + 30
    while "ready" not in out.read_text():
        assert time.monotonic() < deadline and proc.poll() is None
        time.sleep(0.05)
    yield proc
    proc.kill()
    proc.wait()


@pytest.mark.parametrize("verbose", [False, True], ids=["summary", "progress"])
def test_collect_prints_target_data_escaped(rank, tmp_path: Path, verbose: bool):
    argv = [sys.executable, "-m", "forensics", "collect", "--pid", str(rank.pid), "-o", str(tmp_path / "b"),
            "--timeout", "10"] + (["-v"] if verbose else ["-q"])
    done = subprocess.run(argv, capture_output=True, timeout=180, env={**os.environ, "PYTHONPATH": str(REPO)})
    out = done.stdout + done.stderr
    assert done.returncode in (0, 3), out[-2000:]
    assert b"nccl_log" in done.stdout and b"owned" in done.stdout  # the line that quoted the name is there
    assert b"\\x1b]0;owned\\x07" in done.stdout  # shown, escaped
    assert not [raw for raw in RAW if raw in out], out[-2000:]
