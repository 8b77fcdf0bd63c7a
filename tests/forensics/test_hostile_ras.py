"""forensics.ras_client against peers that are not honest RAS servers: every read is bounded.

Whatever listens on NCCL_RAS_ADDR's port is only trusted to be a TCP peer. Each peer here is a real
socket server in a thread: one that never ends its greeting, one that never ends its report, one that
stops midway, one that trickles. The client must return (or refuse) within its bounds and keep what
came before a cut.
"""

from __future__ import annotations

import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from forensics.ras_client import MAX_LINE, RasError, query

pytestmark = pytest.mark.integration  # it starts real processes (it was under tests/integration)

ROOT = Path(__file__).resolve().parents[2]


class Peer(threading.Thread):
    """Accepts one client, answers its greeting as `greet` says, then runs `after(conn)`."""

    def __init__(self, greet: bytes, after=None) -> None:
        super().__init__(daemon=True)
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(1)
        self.port = self.sock.getsockname()[1]
        self.greet, self.after = greet, after
        self.stop = threading.Event()

    def run(self) -> None:
        try:
            conn, _ = self.sock.accept()
        except OSError:
            return
        with conn:
            try:
                conn.recv(64)  # CLIENT PROTOCOL 2
                conn.sendall(self.greet)
                if self.after:
                    conn.recv(64)  # STATUS
                    self.after(conn, self.stop)
            except OSError:
                pass  # the client hung up: what it was meant to do

    def close(self) -> None:
        self.stop.set()
        self.sock.close()
        self.join(10)


@pytest.fixture()
def peers():
    made: list[Peer] = []

    def make(greet: bytes, after=None) -> Peer:
        p = Peer(greet, after)
        p.start()
        made.append(p)
        return p

    yield make
    for p in made:
        p.close()


def _endless(conn, stop) -> None:
    block = b"x" * 65536
    while not stop.is_set():
        conn.sendall(block)


def _half_then_silence(conn, stop) -> None:
    conn.sendall(b"Errors\n======\nrank 3 is missing\n")
    stop.wait(30)


def _trickle(conn, stop) -> None:
    while not stop.is_set():
        conn.sendall(b".")
        time.sleep(0.05)


def test_a_greeting_without_end_is_refused(peers):
    p = peers(b"S" * (MAX_LINE * 4))
    with pytest.raises(RasError, match="not RAS"):
        query(f"127.0.0.1:{p.port}", timeout=5)


def test_a_report_without_end_is_kept_up_to_the_bound(peers):
    p = peers(b"SERVER PROTOCOL 2\n", _endless)
    answer = query(f"127.0.0.1:{p.port}", timeout=5, max_bytes=1 << 20)
    assert len(answer.text) == 1 << 20 and "passed 1048576 bytes" in answer.cut


def test_a_report_that_stops_midway_keeps_what_came(peers):
    p = peers(b"SERVER PROTOCOL 2\n", _half_then_silence)
    answer = query(f"127.0.0.1:{p.port}", timeout=1)
    # verbatim input: what the hostile RAS peer sent, kept as sent
    assert answer.text == "Errors\n======\nrank 3 is missing\n" and "stopped sending for 1 s" in answer.cut


def test_a_trickled_report_ends_at_the_time_bound(peers):
    p = peers(b"SERVER PROTOCOL 2\n", _trickle)
    start = time.monotonic()
    answer = query(f"127.0.0.1:{p.port}", timeout=5, max_seconds=1.0)
    # wording is the behaviour: why the report is cut, as the output says
    assert time.monotonic() - start < 4 and answer.text.startswith("..") and "time for the whole report" in answer.cut


def test_the_command_says_a_cut_report_and_exits_3(peers):
    p = peers(b"SERVER PROTOCOL 2\n", _half_then_silence)
    proc = subprocess.run([sys.executable, "-m", "forensics", "ras", "--addr", f"127.0.0.1:{p.port}", "--timeout", "1"],
                          cwd=ROOT, capture_output=True, text=True, timeout=60,
                          env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"})
    assert proc.returncode == 3, proc.stderr
    # wording is the behaviour: the CLI's note that the report is cut
    assert "rank 3 is missing" in proc.stdout and "the report is cut" in proc.stderr
