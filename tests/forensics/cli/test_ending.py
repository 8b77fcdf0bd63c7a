"""Issue 40 item 9, signals: SIGTERM, SIGINT and SIGHUP end every command with its own exit code (143, 130,
129: docs/exit-codes.md), leave no temporary folder or lock, and, for `collect`, a manifest whose note names
the signal and targets running as before. Real processes: a real rank held by a real gdb (collect --gdb,
the signal sent once gdb's stop lock exists), and `analyze` of a loose folder large enough to be mid-read.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from hf_testpaths import REPO

pytestmark = pytest.mark.integration

CODES = {signal.SIGTERM: 143, signal.SIGINT: 130, signal.SIGHUP: 129}


def _env(tmpdir: Path) -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": str(REPO), "TMPDIR": str(tmpdir)}


def _wait_for(predicate, seconds: float, what: str) -> None:
    deadline = time.monotonic() + seconds
    while not predicate():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.02)


def _tracer(pid: int) -> int:
    """TracerPid of `pid`: not 0 while py-spy, gdb or the native helper holds it."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("TracerPid:"):
            return int(line.split()[1])
    return 0


def _state(pid: int) -> str:
    text = Path(f"/proc/{pid}/stat").read_text()
    return text[text.rfind(")") + 2]


@pytest.fixture
def rank(tmp_path: Path):
    """A sleeping Python rank 0 of 1 (its stdout a file); killed after the test."""
    out = tmp_path / "rank0.out"
    env = {"PATH": os.environ["PATH"], "RANK": "0", "WORLD_SIZE": "1", "LOCAL_RANK": "0"}
    with open(out, "w") as fh:
        proc = subprocess.Popen([sys.executable, "-c", "import time; print('ready', flush=True); time.sleep(600)"],
                                env=env, stdout=fh, stderr=subprocess.STDOUT)
    _wait_for(lambda: "ready" in out.read_text(), 30, "the rank")
    yield proc
    proc.kill()
    proc.wait()


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGHUP, signal.SIGINT], ids=lambda s: s.name)
def test_collect_gdb_ends_on_signal_with_its_code_and_note(rank, tmp_path: Path, sig: signal.Signals):
    tmpdir = tmp_path / "tmp"
    tmpdir.mkdir()
    out = tmp_path / "bundle"
    collect = subprocess.Popen([sys.executable, "-m", "forensics", "collect", "--pid", str(rank.pid), "--gdb",
                                "--native", "--samples", "0", "-o", str(out), "--timeout", "60"], env=_env(tmpdir),
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    _wait_for(lambda: _tracer(rank.pid) or collect.poll() is not None, 60, "a tool attached to the target")
    assert collect.poll() is None, collect.communicate()
    assert list(tmpdir.glob("forensics-run-*")), "the command's temp folder"
    collect.send_signal(sig)  # while a tool holds the target: the hardest moment to stop at
    stdout, stderr = collect.communicate(timeout=60)
    assert collect.returncode == CODES[sig], (collect.returncode, stderr)
    assert "Traceback" not in stderr, stderr
    assert list(tmpdir.iterdir()) == [], "temp folder or stop lock left behind"
    man = json.loads((out / "manifest.json").read_text())
    assert man["interrupted"] is True
    assert any(f"interrupted by {sig.name}" in note for note in man["notes"]), man["notes"]
    _wait_for(lambda: _state(rank.pid) in "SR" and not _tracer(rank.pid), 10, "the target to run again, untraced")
    assert rank.poll() is None
    assert not (out / ".forensics.lock").exists()


@pytest.fixture(scope="module")
def big_folder(tmp_path_factory) -> Path:
    """A loose folder of 8 ranks' NCCL-style logs, 20 MB in all: long enough to read that a signal lands mid-read."""
    folder = tmp_path_factory.mktemp("loose")
    line = "node{h}:{pid}:{pid} [0] NCCL INFO Channel 00/0 : {r}[0] -> {n}[0] via P2P/IPC step {i}\n"
    for r in range(8):
        text = "".join(line.format(h=r // 4, pid=1000 + r, r=r, n=(r + 1) % 8, i=i) for i in range(30000))
        (folder / f"rank{r}.log").write_text(text)
    return folder


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGHUP, signal.SIGINT], ids=lambda s: s.name)
@pytest.mark.parametrize("command", ["analyze", "hosts", "report"])
def test_reading_commands_end_on_signal_and_leave_no_temp_folder(big_folder: Path, tmp_path: Path, command: str,
                                                                  sig: signal.Signals):
    tmpdir = tmp_path / "tmp"
    tmpdir.mkdir()
    argv = [sys.executable, "-m", "forensics", command, str(big_folder)]
    if command == "report":
        argv += ["-o", str(tmp_path / "r.html")]
    proc = subprocess.Popen(argv, env=_env(tmpdir), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    _wait_for(lambda: list(tmpdir.glob("forensics-run-*")) or proc.poll() is not None, 60, "the command's temp folder")
    time.sleep(0.5)  # into the reading
    assert proc.poll() is None, "the command ended before the signal: make the folder larger"
    proc.send_signal(sig)
    _, stderr = proc.communicate(timeout=60)
    assert proc.returncode == CODES[sig], (proc.returncode, stderr)
    assert "Traceback" not in stderr, stderr
    assert list(tmpdir.iterdir()) == []
    assert not list(tmp_path.glob("*.html")) and not list(tmp_path.glob(".*.tmp"))
