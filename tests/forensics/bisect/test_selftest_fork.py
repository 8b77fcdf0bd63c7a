"""The self-test job's --fork mode (one torch import, ranks forked) behaves like the plain one:
a good group passes, a failing host fails the job, a hanging host keeps it running and its
whole process group dies with it when the launcher kills it."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time

import pytest

pytestmark = pytest.mark.integration


def _job(tmp_path, hosts, port, bad=None):
    argv = [sys.executable, "-m", "forensics.bisect.selftest_job", "--hosts", hosts, "--port", str(port),
            "--fork", "--gloo-timeout", "3"]
    if bad:
        path = tmp_path / "bad.json"
        path.write_text(json.dumps({"seed": 1, "hosts": bad}))
        argv += ["--bad-file", str(path)]
    return subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True)


def test_fork_mode_pass_fail_and_hang(tmp_path):
    good = _job(tmp_path, "a,b,c", 29795)
    assert good.wait(timeout=60) == 0, good.stderr.read()
    failing = _job(tmp_path, "a,b,c", 29796, {"b": {"mode": "fail"}})
    assert failing.wait(timeout=60) != 0
    hanging = _job(tmp_path, "a,b", 29797, {"b": {"mode": "hang"}})
    try:
        time.sleep(4)
        assert hanging.poll() is None  # still hung after the good rank's gloo wait
    finally:
        os.killpg(hanging.pid, signal.SIGKILL)
        hanging.wait(timeout=10)
    deadline = time.monotonic() + 5
    while _live_in_group(hanging.pid) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert _live_in_group(hanging.pid) == []  # the forked ranks died with the job's group


def _live_in_group(pgid: int) -> list[int]:
    """Pids of the process group that are still alive (zombies awaiting a reaper are dead)."""
    live = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            stat = open(f"/proc/{entry}/stat").read()
        except OSError:
            continue
        fields = stat[stat.rfind(")") + 2:].split()
        if int(fields[2]) == pgid and fields[0] not in ("Z", "X"):
            live.append(int(entry))
    return live
