"""Issue 40 item 2: a bisect state file carries no authority.

- On resume every host of every round (and of the results) must be one of the hosts given on the command
  line: a state edited to send the test to `evilhost` is refused and the test never sees that name.
- `reap_orphans` signals only processes this bisect started, proven by a random token in the job's
  environment (/proc/PID/environ), its start time and its own process group: a victim's pid and start time
  written into the file are left alone; a real job orphaned by a SIGKILLed runner is still killed.

Real runs of `forensics bisect` (local launcher, a shell test), real processes.
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

from forensics.bisect.runner import _start_time
from forensics.cli.main import main
from hf_testpaths import REPO


def _test(log: Path, gate: Path | None = None) -> str:
    """A shell test that logs its hosts, fails when n05 is among them, and (with `gate`) hangs until it exists."""
    hang = f"[ -e {gate} ] || sleep 600; " if gate else ""
    return f"sh -c 'echo \"$0\" >> {log}; {hang}case \",$0,\" in *,n05,*) exit 1;; esac; exit 0' {{hosts}}"


def _argv(tmp: Path, test: str, *extra: str) -> list[str]:
    return ["bisect", "--hosts", "n[01-16]", "--test", test, "--flake-rate", "0.001", "--timeout", "900",
            "--state", str(tmp / "s.json"), "--json", "--quiet", *extra]


def _edit(path: Path, change) -> None:
    state = json.loads(path.read_text())
    change(state)
    path.write_text(json.dumps(state))
    os.chmod(path, 0o600)


@pytest.mark.parametrize("how", ["extra host", "host swapped", "unit out of range", "result host", "bad pid"])
def test_hosts_edited_into_the_state_are_refused(tmp_path: Path, capsys, how: str):
    log = tmp_path / "ran.log"
    assert main(_argv(tmp_path, _test(log), "--stop-after-round", "1")) == 3
    before = log.read_text()

    def change(state):
        group = state["rounds"][0]["groups"][0]
        group["status"] = "pending"
        if how == "extra host":
            group["hosts"].append("evilhost")
        elif how == "host swapped":
            group["hosts"][0] = "evilhost"
        elif how == "unit out of range":
            group["units"].append(99)
        elif how == "result host":
            state["results"]["unary_llr"] = {"evilhost": 3.0}
        else:
            group.update(status="running", pid="1; rm -rf /")

    _edit(tmp_path / "s.json", change)
    capsys.readouterr()
    assert main(_argv(tmp_path, _test(log))) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].endswith(": not used"), err
    assert log.read_text() == before and "evilhost" not in before  # no job ran, evilhost never named


def _victim() -> subprocess.Popen:
    """Someone else's process: its own session and process group, like a bisect job, but not started by one."""
    return subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"], start_new_session=True,
                            env={"PATH": os.environ["PATH"], "FORENSICS_BISECT_JOB_TOKEN": "0" * 32})


@pytest.mark.parametrize(("token", "killed"), [(None, False), ("f" * 32, False), ("0" * 32, True)])
def test_a_pid_written_into_the_state_is_not_signalled(tmp_path: Path, capsys, token, killed):
    """The issue's reproducer: pid and start time of a process the bisect never started, planted in a running job
    with no token or a wrong one: the victim lives on. The control: the one token the victim's environment
    holds is what the check reads (only a process that carries it, i.e. a job of ours, is ever signalled)."""
    log = tmp_path / "ran.log"
    assert main(_argv(tmp_path, _test(log), "--stop-after-round", "1")) == 3
    victim = _victim()
    try:
        time.sleep(0.2)
        started = _start_time(victim.pid)

        def change(state):
            group = state["rounds"][0]["groups"][0]
            group.update(status="running", pid=victim.pid, pid_start=started)
            if token:
                group["token"] = token

        _edit(tmp_path / "s.json", change)
        capsys.readouterr()
        code = main(_argv(tmp_path, _test(log)))
        assert code == 5
        try:
            victim.wait(timeout=2)
        except subprocess.TimeoutExpired:
            pass
        assert (victim.poll() is not None) == killed, "signalled without proof" if not killed else "the control"
    finally:
        victim.kill()
        victim.wait()


@pytest.mark.integration
def test_a_real_orphan_of_a_killed_runner_is_still_reaped(tmp_path: Path):
    """A runner SIGKILLed with a hung job: the resumed runner proves the job is its own (token in its env)
    and kills its process group, then reruns it."""
    log, gate = tmp_path / "ran.log", tmp_path / "GO"
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    argv = [sys.executable, "-m", "forensics", *_argv(tmp_path, _test(log, gate))]
    runner = subprocess.Popen(argv, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    state = tmp_path / "s.json"
    deadline = time.monotonic() + 120
    jobs: list[int] = []
    while not jobs:
        assert time.monotonic() < deadline and runner.poll() is None
        time.sleep(0.2)
        try:
            data = json.loads(state.read_text())
        except (OSError, ValueError):
            continue
        jobs = [g["pid"] for r in data["rounds"] for g in r["groups"] if g.get("status") == "running" and g.get("pid")]
    time.sleep(0.5)
    runner.send_signal(signal.SIGKILL)
    runner.wait()
    alive = [pid for pid in jobs if _start_time(pid) is not None]
    assert alive, "the orphaned jobs"
    gate.touch()
    done = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 5, done.stderr
    time.sleep(0.5)
    for pid in alive:
        stat = Path(f"/proc/{pid}/stat")
        assert not stat.exists() or stat.read_text().rsplit(")", 1)[1].split()[0] == "Z", f"orphan {pid} still runs"
