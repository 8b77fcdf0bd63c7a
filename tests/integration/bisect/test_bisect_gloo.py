"""Real bisections: every group job is a gloo all_reduce across the group's "hosts".

Each host name is one process of a real gloo job on 127.0.0.1; hosts named in a bad
file hang (join, then never enter the collective) or fail (exit at start). The
`forensics bisect` CLI runs as its own process, as an on-call engineer would run it.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.integration

REPO = Path(__file__).resolve().parents[3]


def bisect(tmp: Path, hosts: str, bad: dict, ports: int, *extra: str, job_flake: float = 0.0,
           timeout: int = 15) -> tuple[int, dict, str]:
    """Run `forensics bisect --json` on the selftest job; return rc, report, stderr."""
    bad_file = tmp / "bad.json"
    bad_file.write_text(json.dumps(bad))
    test = (f"{sys.executable} -m forensics.bisect.selftest_job --hosts {{hosts}} --port {{port}} "
            f"--bad-file {bad_file} --gloo-timeout 4 --flake {job_flake}")
    argv = [sys.executable, "-m", "forensics.cli.main", "bisect", "--hosts", hosts, "--test", test,
            "--timeout", str(timeout), "--port-base", str(ports), "--port-span", "40",
            "--state", str(tmp / "state.json"), "--json", *extra]
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    done = subprocess.run(argv, capture_output=True, text=True, env=env, timeout=400, cwd=tmp)
    leftovers = subprocess.run(["pgrep", "-f", str(bad_file)], capture_output=True, text=True).stdout.split()
    assert not leftovers, f"test processes left running: {leftovers}"
    report = json.loads(done.stdout) if done.stdout.strip() else {}
    return done.returncode, report, done.stderr


def bad_hosts(report: dict) -> set[str]:
    return {e["unit"] for e in report["bad"]}


def test_one_hanging_host_is_found(tmp_path):
    rc, rep, err = bisect(tmp_path, "h[01-08]", {"hosts": {"h06": {"mode": "hang"}}}, 29700,
                          "--flake-rate", "0.001")
    assert rc == 0, err
    assert bad_hosts(rep) == {"h06"}
    assert rep["undecided"] == []
    assert any(j["status"] == "hang" for j in rep["jobs_detail"])
    assert "round 1 (rows)" in err  # live progress went to stderr


def test_two_failing_hosts_that_fool_the_hand_method(tmp_path):
    # h01 and h06 sit in different rows and columns of the 2 x 4 grid: the hand
    # method's intersection would also convict h02 and h05.
    rc, rep, err = bisect(tmp_path, "h[01-08]", {"hosts": {"h01": {"mode": "fail"}, "h06": {"mode": "fail"}}},
                          29740, "--flake-rate", "0.001", "--expected-bad", "2")
    assert rc == 0, err
    assert bad_hosts(rep) == {"h01", "h06"}
    assert rep["rounds"] >= 3


def test_flaky_test_and_flaky_host(tmp_path):
    # Any job fails with probability 0.2 whatever its hosts; h04 fails 90% of its jobs.
    rc, rep, err = bisect(tmp_path, "h[01-06]", {"seed": 3, "hosts": {"h04": {"mode": "fail", "p": 0.9}}},
                          29780, "--flake-rate", "0.2", "--miss-rate", "0.1", "--confidence", "0.95",
                          job_flake=0.2)
    assert rc == 0, err
    assert bad_hosts(rep) == {"h04"}
    assert rep["undecided"] == []


def test_resume_after_stopping_half_way(tmp_path):
    bad = {"hosts": {"h03": {"mode": "fail"}}}
    rc, rep, err = bisect(tmp_path, "h[01-06]", bad, 29820, "--flake-rate", "0.001", "--stop-after-round", "1")
    assert rc == 4  # not decided yet
    state = json.loads((tmp_path / "state.json").read_text())
    assert len(state["rounds"]) == 1
    first = [(g["id"], g["status"], g["seconds"]) for g in state["rounds"][0]["groups"]]
    # Resume with no host or test arguments: everything comes from the state file.
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    done = subprocess.run([sys.executable, "-m", "forensics.cli.main", "bisect", "--state",
                           str(tmp_path / "state.json"), "--json"], capture_output=True, text=True,
                          env=env, timeout=400, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert "resuming" in done.stderr
    rep = json.loads(done.stdout)
    assert bad_hosts(rep) == {"h03"}
    state = json.loads((tmp_path / "state.json").read_text())
    assert [(g["id"], g["status"], g["seconds"]) for g in state["rounds"][0]["groups"]] == first
