"""Items 2, 3, 4 and 6 of issue 16 on real processes: a target running as `nobody`
names files it must not get copied, sets counts no job has, and prints secrets.

The collector runs as root (as in production); the target is a real Python process
started with setpriv as nobody. Each case is the repro shape from the issue:
NCCL_DEBUG_FILE=/etc/shadow, a Flight Recorder dump symlinked to /etc/shadow, a
sparse 2 GB dump, a recorder .bin symlinked to /dev/zero, a FIFO as NCCL log,
LOCAL_WORLD_SIZE=3000000000, secrets in argv, environment and stdout.
"""

from __future__ import annotations

import json
import os
import pwd
import shutil
import stat
import subprocess
import sys
import time
from pathlib import Path

import pytest

from open_dirs import open_dir

pytestmark = [pytest.mark.integration,
              pytest.mark.skipif(os.geteuid() != 0 or not shutil.which("setpriv"), reason="needs root and setpriv")]

NOBODY = pwd.getpwnam("nobody")
SHADOW_LINE = Path("/etc/shadow").read_text().splitlines()[0] if os.geteuid() == 0 else ""
TOKEN = "ghp_" + "Z" * 36
API_KEY = "sk_live_abcdef123456"


@pytest.fixture
def nobody_dir():
    """A folder nobody owns under /tmp (root's pytest tmp_path is not reachable for nobody)."""
    with open_dir("hf-harden-", 0o755) as path:
        os.chown(path, NOBODY.pw_uid, NOBODY.pw_gid)
        yield path


def _as_nobody(*argv: str) -> list[str]:
    return ["setpriv", f"--reuid={NOBODY.pw_uid}", f"--regid={NOBODY.pw_gid}", "--clear-groups", *argv]


def _start_target(folder: Path, env: dict[str, str], stdout: Path) -> subprocess.Popen:
    """A sleeping Python rank as nobody, whose stdout is a nobody-owned file holding a secret."""
    stdout.touch()
    os.chown(stdout, NOBODY.pw_uid, NOBODY.pw_gid)
    code = f"import sys, time; print('login with {TOKEN}', flush=True); print('ready', flush=True); time.sleep(300)"
    with open(stdout, "w") as out:
        proc = subprocess.Popen(_as_nobody(sys.executable, "-c", code, f"--api-key={API_KEY}", "--token", TOKEN),
                                env=env, stdout=out, stderr=subprocess.STDOUT, cwd=folder)
    deadline = time.monotonic() + 20
    while "ready" not in stdout.read_text():
        assert time.monotonic() < deadline and proc.poll() is None, "target did not start"
        time.sleep(0.05)
    return proc


def _collect(pid: int, out: Path, timeout: float = 90) -> tuple[subprocess.CompletedProcess, float]:
    start = time.monotonic()
    done = subprocess.run([sys.executable, "-m", "forensics", "collect", "--pid", str(pid), "-o", str(out), "--json",
                           "-q", "--timeout", "10"], capture_output=True, text=True, timeout=timeout,
                          env={**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[3])})
    return done, time.monotonic() - start


def _bundle_text(out: Path) -> str:
    return "\n".join(p.read_text(errors="replace") for p in out.rglob("*") if p.is_file())


def _rank_collectors(out: Path) -> dict:
    man = json.loads((out / "manifest.json").read_text())
    (rank,) = man["ranks"]
    return man, {c["name"]: c for c in rank["collectors"]}


def test_nobody_cannot_make_root_copy_shadow(nobody_dir, tmp_path):
    prefix = nobody_dir / "nccl_trace_rank_"
    os.symlink("/etc/shadow", f"{prefix}0")  # the FR dump repro: a link at the dump name
    recdir = nobody_dir / "rec"
    recdir.mkdir()
    env = {"PATH": os.environ["PATH"], "RANK": "0", "WORLD_SIZE": "2", "LOCAL_WORLD_SIZE": "3000000000",
           "GROUP_RANK": "0", "NCCL_DEBUG_FILE": "/etc/shadow", "TORCH_FR_DUMP_TEMP_FILE": str(prefix),
           "FORENSICS_RECORDER_DIR": str(recdir), "DB_PASS": "hunter2", "KAGGLE_KEY": "kagglekey123",
           "EXTRA": f"--api-key={API_KEY}", "REDIS_URL": "redis://:redispw@cache:6379/0"}
    target = _start_target(nobody_dir, env, nobody_dir / "rank0.out")
    try:
        os.symlink("/dev/zero", recdir / f"nccl-recorder.h.{target.pid}.0.bin")
        out = tmp_path / "bundle"
        done, seconds = _collect(target.pid, out)
        assert target.poll() is None
    finally:
        target.kill()
        target.wait()
    assert done.returncode in (0, 3), done.stderr
    text = _bundle_text(out)
    assert SHADOW_LINE and SHADOW_LINE not in text, "/etc/shadow reached the bundle"
    man, cols = _rank_collectors(out)
    # opened as nobody (issue 31): the open itself is refused; a readable root file would fail the owner check
    # verbatim input: the OS's own message, with the uid it ran as
    assert cols["nccl_log"]["status"] == "denied" and "Permission denied (as uid" in cols["nccl_log"]["error"]
    assert cols["flight_recorder"]["status"] == "denied" and "symbolic link" in cols["flight_recorder"]["error"]
    assert cols["recorder"]["status"] == "denied" and "symbolic link" in cols["recorder"]["error"]
    assert sum(p.stat().st_size for p in out.rglob("*") if p.is_file()) < 1 << 20  # no /dev/zero stream
    # LOCAL_WORLD_SIZE=3000000000: collect survives, the absurd number is not used
    assert man["ranks"][0]["local_world_size"] is None and len(man["missing"]) <= 1
    # secrets: argv, environment and stdout
    for secret in (TOKEN, API_KEY, "hunter2", "kagglekey123", "redispw"):
        assert secret not in text, secret
    assert "<redacted>" in json.dumps(man["ranks"][0]["cmdline"])
    stdout_copy = out / man["ranks"][0]["dir"] / "stdout.log"
    assert "login with <redacted>" in stdout_copy.read_text()
    assert stat.S_IMODE(stdout_copy.stat().st_mode) == 0o600
    assert seconds < 60


def test_sparse_dump_fifo_log_and_foreign_owner(nobody_dir, tmp_path):
    """A 2 GB sparse dump is refused whole (not 2 GB in the bundle); a FIFO as NCCL log never hangs."""
    prefix = nobody_dir / "fr_"
    dump = Path(f"{prefix}0")
    with open(dump, "wb") as fh:
        fh.truncate(2 << 30)
    os.chown(dump, NOBODY.pw_uid, NOBODY.pw_gid)
    small = Path(f"{prefix}0.json")
    small.write_text('{"version": "2.4"}')
    os.chown(small, NOBODY.pw_uid, NOBODY.pw_gid)
    fifo = nobody_dir / "nccl.log"
    os.mkfifo(fifo)
    os.chown(fifo, NOBODY.pw_uid, NOBODY.pw_gid)
    env = {"PATH": os.environ["PATH"], "RANK": "0", "WORLD_SIZE": "1", "NCCL_DEBUG_FILE": str(fifo),
           "TORCH_FR_DUMP_TEMP_FILE": str(prefix)}
    target = _start_target(nobody_dir, env, nobody_dir / "rank0.out")
    try:
        out = tmp_path / "bundle"
        done, seconds = _collect(target.pid, out)
    finally:
        target.kill()
        target.wait()
    assert done.returncode in (0, 3), done.stderr
    man, cols = _rank_collectors(out)
    assert cols["nccl_log"]["status"] == "denied" and "FIFO" in cols["nccl_log"]["error"]
    fr = cols["flight_recorder"]
    assert fr["status"] == "ok" and [Path(f).name for f in fr["files"]] == ["fr_0.json"]
    assert "too large" in json.dumps(fr["details"]["refused"])
    assert sum(p.stat().st_size for p in out.rglob("*") if p.is_file()) < 1 << 20
    copied = out / fr["files"][0]
    assert stat.S_IMODE(copied.stat().st_mode) == 0o600
    assert seconds < 60
