"""The py-spy collector's peer of a point-to-point wait (issue 39 item 1) on a real gloo job: rank 0 blocked in
`dist.recv(src=1)` under a frame holding a decoy secret, rank 1 asleep outside torch.distributed
(tests/support/locals_job.py). py-spy --locals runs only for the rank in the receive; its kept src reaches the
bundle, the secret never does, and the manifest says what ran and what it kept."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from hf_testpaths import REPO
from forensics.collect.tool import find_tool

pytestmark = [pytest.mark.integration,
              pytest.mark.skipif(os.geteuid() != 0 or find_tool("py-spy") is None, reason="needs root and py-spy")]

JOB = Path(__file__).resolve().parents[2] / "support" / "locals_job.py"


def _port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _records(manifest: dict) -> dict[int, dict]:
    """pid -> its py-spy collector record."""
    out = {}
    for rank in manifest["ranks"]:
        for rec in rank.get("collectors") or ():
            if rec.get("name") == "py-spy":
                out[rank["pid"]] = rec
    return out


def test_only_the_rank_in_a_receive_is_read_for_locals_and_only_its_src_is_kept(tmp_path):
    port, ready = _port(), tmp_path / "ready"
    procs = [subprocess.Popen([sys.executable, str(JOB), str(r), str(port), str(ready)], stdout=subprocess.DEVNULL,
                              stderr=subprocess.DEVNULL) for r in range(2)]
    try:
        end = time.monotonic() + 120
        while not all(Path(f"{ready}.{r}").exists() for r in range(2)) and time.monotonic() < end:
            time.sleep(0.2)
        time.sleep(2.0)  # rank 0 reaches its recv
        out = tmp_path / "bundle"
        done = subprocess.run([sys.executable, "-m", "forensics", "collect", "--pid", f"{procs[0].pid},{procs[1].pid}",
                               "-o", str(out), "-q", "--second-look", "0"], capture_output=True, text=True,
                              timeout=300, env={**os.environ, "PYTHONPATH": str(REPO)})
        assert done.returncode in (0, 3), done.stderr
    finally:
        for p in procs:
            p.send_signal(signal.SIGKILL)
            p.wait(timeout=30)
    records = _records(json.loads((out / "manifest.json").read_text()))
    waiter, sleeper = records[procs[0].pid], records[procs[1].pid]
    note = waiter["details"]["p2p_locals"]
    assert "--locals" in note["argv"] and note["frames"] == ["recv: src=1, tag=0"], note
    assert "p2p_locals" not in sleeper["details"]  # no point-to-point frame: py-spy ran once, without --locals
    (stack,) = [f for f in waiter["files"] if f.endswith("pyspy.json")]
    frames = json.loads((out / stack).read_text())[0]["frames"]
    assert frames[0]["name"] == "recv" and frames[0]["locals"] == [{"name": "src", "repr": "1"},
                                                                   {"name": "tag", "repr": "0"}]
    assert all(f.get("locals") is None for f in frames[1:])  # py-spy writes "locals": null without --locals
    for path in out.rglob("*"):
        assert not path.is_file() or b"hunter2" not in path.read_bytes(), path
