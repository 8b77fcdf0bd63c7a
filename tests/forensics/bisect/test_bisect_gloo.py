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
import time
from pathlib import Path

import pytest

pytestmark = pytest.mark.integration

REPO = Path(__file__).resolve().parents[3]


def bisect_argv(tmp: Path, hosts: str, bad: dict, ports: int, *extra: str, job_flake: float = 0.0,
                timeout: int = 15) -> list[str]:
    """The `forensics bisect --json` command line on the selftest job (a resume gives the same one)."""
    bad_file = tmp / "bad.json"
    bad_file.write_text(json.dumps(bad))
    test = (f"{sys.executable} -m forensics.bisect.selftest_job --hosts {{hosts}} --port {{port}} "
            f"--bad-file {bad_file} --gloo-timeout 4 --flake {job_flake}")
    return [sys.executable, "-m", "forensics.cli.main", "bisect", "--hosts", hosts, "--test", test,
            "--timeout", str(timeout), "--port-base", str(ports), "--port-span", "40",
            "--state", str(tmp / "state.json"), "--json", *extra]


def bisect(tmp: Path, hosts: str, bad: dict, ports: int, *extra: str, job_flake: float = 0.0,
           timeout: int = 15) -> tuple[int, dict, str]:
    """Run `forensics bisect --json` on the selftest job; return rc, report, stderr."""
    bad_file = tmp / "bad.json"
    argv = bisect_argv(tmp, hosts, bad, ports, *extra, job_flake=job_flake, timeout=timeout)
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
    assert rc == 5, err  # bad hosts found
    assert bad_hosts(rep) == {"h06"}
    assert rep["undecided"] == []
    assert any(j["status"] == "hang" for j in rep["jobs"])
    assert "round 1 (rows)" in err  # live progress went to stderr


def test_two_failing_hosts_that_fool_the_hand_method(tmp_path):
    # h01 and h06 sit in different rows and columns of the 2 x 4 grid: the hand
    # method's intersection would also convict h02 and h05.
    rc, rep, err = bisect(tmp_path, "h[01-08]", {"hosts": {"h01": {"mode": "fail"}, "h06": {"mode": "fail"}}},
                          29740, "--flake-rate", "0.001", "--expected-bad", "2")
    assert rc == 5, err  # bad hosts found
    assert bad_hosts(rep) == {"h01", "h06"}
    assert rep["rounds"] >= 3


def test_flaky_test_and_flaky_host(tmp_path):
    # Any job fails with probability 0.2 whatever its hosts; h04 fails 90% of its jobs.
    rc, rep, err = bisect(tmp_path, "h[01-06]", {"seed": 3, "hosts": {"h04": {"mode": "fail", "p": 0.9}}},
                          29780, "--flake-rate", "0.2", "--miss-rate", "0.1", "--confidence", "0.95",
                          job_flake=0.2)
    assert rc == 5, err  # bad hosts found
    assert bad_hosts(rep) == {"h04"}
    assert rep["undecided"] == []


def test_resume_after_stopping_half_way(tmp_path):
    bad = {"hosts": {"h03": {"mode": "fail"}}}
    rc, rep, err = bisect(tmp_path, "h[01-06]", bad, 29820, "--flake-rate", "0.001", "--stop-after-round", "1")
    assert rc == 3  # not decided yet: partial
    state = json.loads((tmp_path / "state.json").read_text())
    assert len(state["rounds"]) == 1
    first = [(g["id"], g["status"], g["seconds"]) for g in state["rounds"][0]["groups"]]
    # Resume: the same command line (hosts, test and options come from it, never from the state file).
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    done = subprocess.run(bisect_argv(tmp_path, "h[01-06]", bad, 29820, "--flake-rate", "0.001"),
                          capture_output=True, text=True, env=env, timeout=400, cwd=tmp_path)
    assert done.returncode == 5, done.stderr  # bad hosts found
    assert "resuming" in done.stderr
    rep = json.loads(done.stdout)
    assert bad_hosts(rep) == {"h03"}
    state = json.loads((tmp_path / "state.json").read_text())
    assert [(g["id"], g["status"], g["seconds"]) for g in state["rounds"][0]["groups"]] == first


def test_runner_killed_mid_round_resumes_and_reaps_its_hung_job(tmp_path):
    """SIGKILL the runner while a hung job runs; the resumed run kills that job and finishes."""
    bad_file = tmp_path / "bad.json"
    bad_file.write_text(json.dumps({"hosts": {"h02": {"mode": "hang"}}}))
    test = (f"{sys.executable} -m forensics.bisect.selftest_job --hosts {{hosts}} --port {{port}} "
            f"--bad-file {bad_file} --gloo-timeout 4")
    state_file = tmp_path / "state.json"
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    argv = [sys.executable, "-m", "forensics.cli.main", "bisect", "--hosts", "h[01-04]", "--test", test,
            "--timeout", "20", "--port-base", "29860", "--port-span", "30", "--state", str(state_file),
            "--flake-rate", "0.001", "--json"]
    runner = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env, cwd=tmp_path)
    hung_pid = None
    for _ in range(300):  # wait until round 1's good job passed and the hung one is still running
        time.sleep(0.2)
        if state_file.exists():
            rounds = json.loads(state_file.read_text())["rounds"]
            groups = rounds[0]["groups"] if rounds else []
            if any(g["status"] == "pass" for g in groups) and any(g["status"] == "running" for g in groups):
                hung_pid = next(g["pid"] for g in groups if g["status"] == "running")
                break
    assert hung_pid, "round 1 never reached a passed + a running job"
    runner.kill()
    runner.communicate()
    assert Path(f"/proc/{hung_pid}").exists()  # the hung job outlived its runner
    # resume with the same command line
    done = subprocess.run(argv, capture_output=True, text=True, env=env, timeout=400, cwd=tmp_path)
    assert done.returncode == 5, done.stderr  # bad hosts found
    # wording is the behaviour: the CLI's note on a host left running, what the user reads
    assert "left running by an interrupted run" in done.stderr
    assert bad_hosts(json.loads(done.stdout)) == {"h02"}
    time.sleep(0.5)
    assert not Path(f"/proc/{hung_pid}").exists() or \
        Path(f"/proc/{hung_pid}/stat").read_text().split(") ")[1][0] == "Z"
    assert not subprocess.run(["pgrep", "-f", str(bad_file)], capture_output=True, text=True).stdout.split()
