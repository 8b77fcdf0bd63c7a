"""Item 9 of issue 31 on a real `python -m forensics collect` of a real process:

- sixteen sparse 256 MiB Flight Recorder dumps no longer make one collection write
  4 GB: the per-rank and per-collection byte caps count apparent sizes, and what they
  kept out is said in the manifest;
- a fake RAS server on 127.0.0.1 (the RAS port) that dribbles one byte every 4.5 s
  cannot hold collect past the RAS deadline;
- a full disk (a real 2 MiB tmpfs mounted by the test, as root) gives a whole manifest.json
  naming the OS's reason for the copy it stopped, no partial copy and no manifest.json.*.tmp;
- SIGINT at several moments of a collect (imports, discovery, collectors, the end)
  never prints a traceback.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

pytestmark = pytest.mark.integration  # it starts real processes (it was under tests/integration)

ROOT = Path(__file__).resolve().parents[3]
MiB = 1 << 20
ENV = {**os.environ, "PYTHONPATH": str(ROOT)}


@pytest.fixture
def rank(tmp_path):
    """A sleeping Python 'rank 0' whose stdout is a file; yields (process, its environment)."""
    env = {"PATH": os.environ["PATH"], "RANK": "0", "WORLD_SIZE": "1", "LOCAL_RANK": "0",
           "TORCH_FR_DUMP_TEMP_FILE": str(tmp_path / "fr" / "nccl_trace_rank_")}
    (tmp_path / "fr").mkdir()
    out = tmp_path / "rank0.out"
    procs = []

    def start(stdout_bytes: int = 0) -> subprocess.Popen:
        code = ("import sys, time; "
                f"sys.stdout.write(('step 1 loss 2.0 ' * 6 + '\\n') * ({stdout_bytes} // 97)); "
                "print('ready', flush=True); time.sleep(300)")
        with open(out, "w") as fh:
            proc = subprocess.Popen([sys.executable, "-c", code], env=env, stdout=fh, stderr=subprocess.STDOUT)
        procs.append(proc)
        deadline = time.monotonic() + 20
        while "ready" not in out.read_text(errors="replace")[-100:]:
            assert time.monotonic() < deadline and proc.poll() is None
            time.sleep(0.05)
        return proc

    yield start
    for proc in procs:
        proc.kill()
        proc.wait()


def _collect(pid: int, out: Path, *extra: str, timeout: float = 120) -> tuple[subprocess.CompletedProcess, float]:
    start = time.monotonic()
    done = subprocess.run([sys.executable, "-m", "forensics", "collect", "--pid", str(pid), "-o", str(out), "-q",
                           "--timeout", "5", *extra], capture_output=True, text=True, timeout=timeout, env=ENV)
    return done, time.monotonic() - start


def _apparent_bytes(folder: Path) -> int:
    return sum(p.stat().st_size for p in folder.rglob("*") if p.is_file())


def _sparse_dumps(folder: Path, count: int, size: int) -> None:
    for i in range(count):
        name = "nccl_trace_rank_0" + ("" if i == 0 else f".{i}")
        with open(folder / name, "wb") as fh:
            fh.truncate(size)  # no disk blocks: only the apparent size is large


def test_sixteen_sparse_dumps_stop_at_the_rank_cap(rank, tmp_path):
    _sparse_dumps(tmp_path / "fr", 16, 256 * MiB)
    assert sum(os.stat(p).st_blocks for p in (tmp_path / "fr").iterdir()) < 1024  # really sparse
    proc = rank()
    out = tmp_path / "bundle"
    done, _ = _collect(proc.pid, out)
    assert done.returncode in (0, 3), done.stderr
    written = _apparent_bytes(out)
    assert 256 * MiB <= written <= 512 * MiB, written  # was 4.1 GB
    man = json.loads((out / "manifest.json").read_text())
    (fr,) = [c for c in man["ranks"][0]["collectors"] if c["name"] == "flight_recorder"]
    # the logs took a few bytes of the rank's 512 MiB first, so one whole 256 MiB dump fits, not two
    assert len(fr["files"]) == 1
    capped = [why for why in fr["details"]["refused"].values() if "per-rank cap of 512 MiB" in why]
    assert len(capped) == 15 and all("268435456 bytes" in why for why in capped)
    note = next(n for n in man["notes"] if n.startswith("byte caps"))
    assert "apparent size" in note and "15 item(s)" in note


def test_collection_cap_binds_before_the_rank_cap(rank, tmp_path):
    _sparse_dumps(tmp_path / "fr", 16, 64 * MiB)
    proc = rank()
    out = tmp_path / "bundle"
    done, _ = _collect(proc.pid, out, "--max-mib", "200")
    assert done.returncode in (0, 3), done.stderr
    assert _apparent_bytes(out) <= 200 * MiB
    man = json.loads((out / "manifest.json").read_text())
    (fr,) = [c for c in man["ranks"][0]["collectors"] if c["name"] == "flight_recorder"]
    assert len(fr["files"]) == 3  # 3 x 64 MiB fit in 200 MiB with the manifest and logs
    assert all("per-collection cap of 200 MiB" in why for why in fr["details"]["refused"].values())


class DribblingRas(threading.Thread):
    """A 'RAS server' on 127.0.0.1:28028 that sends one byte every 4.5 s to every client, forever."""

    def __init__(self) -> None:
        super().__init__(daemon=True)
        self.sock = socket.socket()
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.sock.bind(("127.0.0.1", 28028))
        self.sock.listen(8)
        self.stop = threading.Event()
        self.clients = 0

    def run(self) -> None:
        self.sock.settimeout(0.2)
        while not self.stop.is_set():
            try:
                conn, _ = self.sock.accept()
            except OSError:
                continue
            self.clients += 1
            threading.Thread(target=self._dribble, args=(conn,), daemon=True).start()

    def _dribble(self, conn: socket.socket) -> None:
        with conn:
            while not self.stop.wait(4.5):
                try:
                    conn.sendall(b"S")
                except OSError:
                    return


def test_dribbling_ras_server_cannot_hold_collect(rank, tmp_path):
    try:
        server = DribblingRas()
    except OSError as err:
        pytest.skip(f"the RAS port 28028 is taken here: {err}")
    server.start()
    try:
        proc = rank()
        done, seconds = _collect(proc.pid, tmp_path / "bundle", timeout=180)
    finally:
        server.stop.set()
        server.sock.close()
    assert server.clients >= 1, "collect never asked the fake RAS server"
    assert done.returncode in (0, 3), done.stderr
    assert seconds < 25, seconds  # RAS deadline: --timeout 5 for all queries together (unbounded before)
    man = json.loads((tmp_path / "bundle" / "manifest.json").read_text())
    (ras,) = [c for h in man["hosts"] for c in h["collectors"] if c["name"] == "ras"]
    # wording is the behaviour: the collector's error as the manifest records it
    assert ras["status"] == "failed" and "did not finish answering within the query's 5 s" in ras["error"]


@pytest.fixture
def tiny_disk(tmp_path):
    """A real 2 MiB tmpfs (needs root and mount); unmounted afterwards."""
    mnt = tmp_path / "tiny"
    mnt.mkdir()
    if os.geteuid() != 0 or not shutil.which("mount"):
        pytest.skip("needs root to mount a tmpfs")
    done = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=2m,mode=0700", "tmpfs", str(mnt)], capture_output=True,
                          text=True)
    if done.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {done.stderr.strip()}")
    yield mnt
    subprocess.run(["umount", "-l", str(mnt)], capture_output=True)


def test_full_disk_gives_one_line_and_a_whole_manifest(rank, tiny_disk):
    proc = rank(stdout_bytes=6 * MiB)  # its 6 MiB stdout tail cannot fit in 2 MiB
    out = tiny_disk / "bundle"
    done, _ = _collect(proc.pid, out)
    assert "Traceback" not in done.stderr, done.stderr
    assert done.returncode == 3
    assert not list(tiny_disk.rglob("*.tmp")), list(tiny_disk.rglob("*"))
    man = json.loads((out / "manifest.json").read_text())  # the last one written, whole
    # issue 40: the copy cut by the full disk is removed (no partial file), which frees the disk: the rank's
    # stdio is recorded as not copied with the OS's reason, and the rest of the collection goes on
    (stdio,) = [c for c in man["ranks"][0]["collectors"] if c["name"] == "stdio"]
    # verbatim input: the OS's own message (ENOSPC)
    assert stdio["status"] != "ok" and "No space left on device" in stdio["error"], stdio
    assert "No space left on device" in done.stdout  # verbatim input: the OS's own message, in the summary
    assert not [p for p in out.rglob("*") if p.is_file() and p.name.startswith("stdout")]


@pytest.mark.parametrize("after", [0.15, 0.3, 0.6, 1.0, 1.6, 2.5, 4.0])
def test_ctrl_c_at_any_moment_prints_no_traceback(rank, tmp_path, after):
    proc = rank()
    cmd = [sys.executable, "-m", "forensics", "collect", "--pid", str(proc.pid), "-o", str(tmp_path / "b"),
           "--timeout", "5", "--samples", "40", "--sample-interval", "0.1"]
    collect = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=ENV)
    time.sleep(after)
    collect.send_signal(signal.SIGINT)
    _, err = collect.communicate(timeout=60)
    assert "Traceback" not in err, err
    assert collect.returncode in (0, 3, 130, -signal.SIGINT), (collect.returncode, err)
    assert proc.poll() is None  # the target is left running, not stopped
    state = Path(f"/proc/{proc.pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    assert state != "T", "target left stopped"
