"""`forensics ras` and the RAS host collector against a TCP peer that speaks the RAS protocol.

The peer follows NCCL's RAS client/server exchange (CLIENT PROTOCOL / SERVER PROTOCOL,
OK to TIMEOUT and SET FORMAT, report until close); the report text is built from
lines seen on the device (field notes). A real NCCL RAS is queried by
scripts/device/nccl_scenarios.py on the GPU machine.
"""

import json
import socket
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from parsers.model.manifest import Status
from forensics.collectors.base import CollectOptions, HostTarget
from forensics.collectors.ras import RasCollector

pytestmark = pytest.mark.integration  # it starts real processes (it was under tests/integration)

ROOT = Path(__file__).resolve().parents[3]
# Real answers of NCCL 2.28.9's RAS server, captured on an H200 while rank 3 of an 8-rank job
# was SIGSTOPped (tests/fixtures/nccl/sigstop); the peer below replays them after its own greeting.
_REAL = ROOT / "tests" / "fixtures" / "nccl" / "sigstop"
REPORT = (_REAL / "ras_status.txt").read_text().split("\n", 1)[1]
JSON_TEXT = (_REAL / "ras_status.json").read_text().split("\n", 1)[1]  # as sent: 2.28.9 drops commas in missing_ranks


class RasPeer(threading.Thread):
    def __init__(self, port=0):
        super().__init__(daemon=True)
        self.sock = socket.socket()
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.sock.bind(("127.0.0.1", port))
        self.addr = f"127.0.0.1:{self.sock.getsockname()[1]}"
        self.sock.listen(4)
        self.seen = []

    def run(self):
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            with conn, conn.makefile("rwb") as f:
                fmt = "text"
                while True:
                    line = f.readline().decode().strip()
                    self.seen.append(line)
                    if not line:
                        break
                    if line.startswith("CLIENT PROTOCOL"):
                        f.write(b"SERVER PROTOCOL 2\n")
                    elif line.startswith(("TIMEOUT", "SET FORMAT")):
                        fmt = "json" if line.endswith("json") else fmt
                        f.write(b"OK\n")
                    elif line.endswith("STATUS"):
                        f.write((JSON_TEXT if fmt == "json" else REPORT).encode())
                        f.flush()
                        break
                    f.flush()

    def close(self):
        try:
            self.sock.shutdown(socket.SHUT_RDWR)  # wakes the accept() of the thread
        except OSError:
            pass
        self.sock.close()
        self.join(5)


@pytest.fixture()
def peer():
    p = RasPeer()  # a free port: the test must not depend on what else runs here
    p.start()
    yield p
    p.close()


def forensics(*args):
    return subprocess.run([sys.executable, "-m", "forensics", *args], cwd=ROOT, capture_output=True, text=True,
                          timeout=60, env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"})


def _closed_port() -> str:
    """An address where nothing listens: a port the kernel just gave out and took back."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return f"127.0.0.1:{s.getsockname()[1]}"


def test_nothing_listening_is_a_clear_error_exit_2():
    addr = _closed_port()
    res = forensics("ras", "--addr", addr, "--timeout", "2")
    assert res.returncode == 2
    assert f"nothing answers at {addr}" in res.stderr and "Traceback" not in res.stderr


def test_text_and_json(peer):
    res = forensics("ras", "--addr", peer.addr, "--verbose-status")
    # verbatim input: the RAS peer's own report
    assert res.returncode == 0 and "Missing communicator data from 1 rank" in res.stdout
    # verbatim input: the RAS peer's own report
    assert "Rank 3 -- GPU 0 managed by process 686" in res.stdout
    assert "VERBOSE STATUS" in peer.seen
    res = forensics("ras", "--addr", peer.addr, "--json")
    assert res.returncode == 0, res.stderr
    out = json.loads(res.stdout)
    jsonschema = pytest.importorskip("jsonschema")
    from forensics.schemas import load

    assert out["schema"] == "hang-forensics/ras/1"
    jsonschema.validate(out, load("ras"))  # the real answer of the recorded RAS peer, against the shipped schema
    assert [(f["kind"], f["comm_rank"], f["pid"]) for f in out["findings"]] == [("missing", 3, 686)]
    assert isinstance(out["report"], dict) and out["report"]["nccl_version"] == "2.28.9"  # repaired, not raw text
    assert "SET FORMAT json" in peer.seen


def test_collector_stores_raw_answers(peer, tmp_path):
    target = HostTarget(host="h", bundle_root=tmp_path, rel_dir="hosts/h")
    rec = RasCollector().collect(target, CollectOptions(timeout=5, extra={"ras_addr": peer.addr}))
    assert rec.status == Status.OK and sorted(rec.files) == [
        "hosts/h/ras_status.json", "hosts/h/ras_status.txt", "hosts/h/ras_status_later.json", "hosts/h/ras_verbose.txt"]
    assert rec.details["ras_status_later.json"]["after_s"] == 1.0  # the second read that tells progress
    # verbatim input: the RAS peer's own report, saved as read
    assert "Missing communicator data from 1 rank" in (tmp_path / "hosts/h/ras_status.txt").read_text()
    assert "missing_ranks" in (tmp_path / "hosts/h/ras_status.json").read_text()


def test_collector_skips_when_no_ras(tmp_path):
    target = HostTarget(host="h", bundle_root=tmp_path, rel_dir="hosts/h")
    rec = RasCollector().collect(target, CollectOptions(timeout=2, extra={"ras_addr": _closed_port()}))
    assert rec.status == Status.SKIPPED and "nothing answers" in rec.error and not rec.files
