"""Fleet collection against a real sshd on loopback, with a real hung 4-rank gloo job on two "hosts".

127.0.0.2 and .3 each run two ranks (rank 3 sleeps in its data loader: the culprit),
127.0.0.4 has nothing listening (unreachable), 127.0.0.5 accepts the login but never
answers (slow). The merged bundle must record both bad hosts and name rank 3.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from fleet_sshd import HOSTS, SLOW, UNREACHABLE, free_port, sshd  # noqa: F401 - sshd is a fixture
from fleet_simjob import REPO, start_sim_job, stop_job, wait_for_hang

pytestmark = pytest.mark.integration
HOST_TIMEOUT = 12  # generous for a loaded 2-core CI box; the slow host sleeps longer (fleet_sshd.SLOW_SECONDS)


def _env() -> dict[str, str]:
    return dict(os.environ, PYTHONPATH=str(REPO))


def _fleet_argv(sshd, out: Path, hosts: str, host_timeout: float = HOST_TIMEOUT) -> list[str]:
    argv = [sys.executable, "-m", "forensics", "collect", "--hosts", hosts, "--host-timeout", str(host_timeout),
            "--remote-python", sshd.remote_python, "--match-env", "FORENSICS_SIM_HOST={host}", "-o", str(out), "--json",
            "--fanout", "4"]
    for option in sshd.ssh_options:
        argv += ["--ssh-option", option]
    return argv


def _remote_collectors_running() -> list[int]:
    """Pids of any fleet collector still alive on this machine (every "host" is this machine)."""
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                cmdline = (entry / "cmdline").read_bytes()
            except OSError:
                continue
            if b"forensics.fleet.remote" in cmdline:
                found.append(int(entry.name))
    return found


@pytest.fixture
def fleet_job(tmp_path):
    pytest.importorskip("torch")
    job = start_sim_job(tmp_path / "job", HOSTS, ranks_per_host=2, culprit=3, port=free_port(["127.0.0.1"]))
    try:
        wait_for_hang(job, timeout=120)
        yield job
    finally:
        stop_job(job)


def _pid_files() -> set[Path]:
    return set(Path("/tmp").glob("forensics-fleet-*.pid"))


def test_fleet_collect_merges_hosts_and_names_the_culprit(sshd, fleet_job, tmp_path):
    out = tmp_path / "job-bundle"
    before = _pid_files()  # another run's (one killed mid-collect leaves its own): not this test's to judge
    hosts = "127.0.0.[2-5]"
    done = subprocess.run(_fleet_argv(sshd, out, hosts) + ["-v"], capture_output=True, text=True, env=_env(),
                          timeout=120)
    assert done.returncode == 3, done.stderr  # PARTIAL: two hosts gave nothing
    summary = json.loads(done.stdout)
    assert summary["hosts"]["127.0.0.2"]["status"] == "ok"
    assert summary["hosts"]["127.0.0.3"]["status"] == "ok"
    assert summary["hosts"][UNREACHABLE]["status"] == "unreachable"
    assert "Connection refused" in summary["hosts"][UNREACHABLE]["error"]
    assert summary["hosts"][SLOW[0]]["status"] == "timeout"
    assert SLOW[0] in summary["hosts"][SLOW[0]]["error"] and f"{HOST_TIMEOUT} s" in summary["hosts"][SLOW[0]]["error"]
    assert summary["ranks"] == 4 and summary["missing_ranks"] == []
    assert "127.0.0.5" in done.stderr and "timed out" in done.stderr  # live progress on stderr (-v: not a terminal)
    assert summary["schema"] == "hang-forensics/collect/1" and summary["mode"] == "fleet"
    assert summary["hosts_answered"] == 2
    assert {"hosts": "127.0.0.[2-3]", "count": 2, "result": "ok"} in summary["host_groups"]

    manifest = json.loads((out / "manifest.json").read_text())
    by_rank = {r["rank"]: r for r in manifest["ranks"]}
    assert {r: by_rank[r]["host"] for r in by_rank} == {0: "127.0.0.2", 1: "127.0.0.2", 2: "127.0.0.3", 3: "127.0.0.3"}
    assert set(by_rank[3]) and by_rank[3]["pid"] == fleet_job.ranks[3].proc.pid
    for rank in manifest["ranks"]:
        assert rank["dir"].startswith(f"hosts/{rank['host']}/")
        for col in rank["collectors"]:
            for rel in col["files"]:
                assert (out / rel).is_file(), rel

    analyzed = subprocess.run([sys.executable, "-m", "forensics", "analyze", str(out)], capture_output=True, text=True,
                              env=_env(), timeout=120)
    assert analyzed.returncode == 0, analyzed.stdout + analyzed.stderr
    verdict = analyzed.stdout.splitlines()[0]
    assert "rank 3 (127.0.0.3" in verdict

    assert _remote_collectors_running() == []
    assert not _pid_files() - before  # every remote collector's pid file is removed when it ends
    for job_rank in fleet_job.ranks:  # collection left every rank as it was: alive
        assert job_rank.proc.poll() is None


def test_hostile_values_never_reach_a_shell(sshd, tmp_path):
    """A --match-env value full of shell syntax travels as data: nothing runs, nothing is created."""
    marker = tmp_path / "pwned"
    out = tmp_path / "b"
    hostfile = tmp_path / "hosts"
    hostfile.write_text(f"# one host, Open MPI style\n{HOSTS[0]} slots=2\n")
    argv = _fleet_argv(sshd, out, HOSTS[0])
    i = argv.index("--hosts")
    argv[i : i + 2] = ["--hostfile", str(hostfile)]
    argv += ["--match-env", f"X=$(touch {marker});touch {marker}`touch {marker}`'\"%h"]
    done = subprocess.run(argv, capture_output=True, text=True, env=_env(), timeout=60)
    assert not marker.exists()
    summary = json.loads(done.stdout)
    assert summary["hosts"][HOSTS[0]]["status"] == "no-ranks"  # the value was compared literally, matched nothing

    bad = subprocess.run([sys.executable, "-m", "forensics", "collect", "--hosts=-oProxyCommand=touch_x"],
                         capture_output=True, text=True, env=_env())
    # refused by the one host-set check (forensics/hostset.py)
    assert bad.returncode == 2 and "not allowed" in bad.stderr
    bad = subprocess.run([sys.executable, "-m", "forensics", "collect", "--hosts", HOSTS[0], "--ssh-option",
                          "Port=22 -oProxyCommand=x"], capture_output=True, text=True, env=_env())
    assert bad.returncode == 2 and "--ssh-option" in bad.stderr


def test_armed_job_on_two_hosts_collects_both_over_ssh(sshd, tmp_path):
    """forensics.arm() in a 2-rank gloo job spread over two "hosts": the leader's collection goes over ssh to both."""
    pytest.importorskip("torch")
    import shlex
    import signal
    import time

    from fleet_simjob import REPO as repo

    out = tmp_path / "trigger"
    out.mkdir()
    collect_args = ["--remote-python", sshd.remote_python, "--match-env", "FORENSICS_SIM_HOST={host}", "--host-timeout",
                    str(HOST_TIMEOUT)]
    for option in sshd.ssh_options:
        collect_args += ["--ssh-option", option]
    procs = []
    master_port = str(free_port(["127.0.0.1"]))  # a fixed port collides with a second run beside this one
    try:
        for rank, host in enumerate(HOSTS):
            env = {k: v for k, v in os.environ.items()
                   if not k.startswith(("NCCL_", "TORCH_FR", "TORCH_NCCL", "FORENSICS_"))}
            env.update(RANK=str(rank), WORLD_SIZE="2", LOCAL_RANK="0", LOCAL_WORLD_SIZE="1", GROUP_RANK=str(rank),
                       MASTER_ADDR="127.0.0.1", MASTER_PORT=master_port, PYTHONPATH=str(repo), OMP_NUM_THREADS="1",
                       FORENSICS_HOST=host, FORENSICS_SIM_HOST=host, FORENSICS_COLLECT_ARGS=shlex.join(collect_args))
            argv = [sys.executable, str(Path(__file__).resolve().parents[2] / "support" / "armed_job.py"), "--fault",
                    "stall", "--out", str(out), "--pg-timeout", "60", "--slow-factor", "1000"]
            with open(out / f"rank{rank}.log", "wb") as log:
                procs.append(subprocess.Popen(argv, env=env, stdout=log, stderr=subprocess.STDOUT,
                                              start_new_session=True))
        deadline = time.monotonic() + 60
        record = summary = None
        while time.monotonic() < deadline and summary is None:
            for path in out.glob("incident-*.json"):
                rec = json.loads(path.read_text())
                done = Path(rec.get("bundle", "") + ".json")
                if rec.get("leader") and done.exists() and done.read_text().strip().endswith("}"):
                    record, summary = rec, json.loads(done.read_text())
            time.sleep(0.3)
        assert summary is not None, "\n".join((out / f"rank{r}.log").read_text()[-800:] for r in range(2))
        assert all(p.poll() is None for p in procs)  # collected before the process group timeout
        assert "--hosts" in record["argv"] and "127.0.0.[2-3]" in record["argv"]
        assert {h: v["status"] for h, v in summary["hosts"].items()} == {"127.0.0.2": "ok", "127.0.0.3": "ok"}
        assert summary["ranks"] == 2
        analyzed = subprocess.run([sys.executable, "-m", "forensics", "analyze", record["bundle"]], capture_output=True,
                                  text=True, env=_env(), timeout=120)
        assert "rank 1 (127.0.0.3" in analyzed.stdout.splitlines()[0], analyzed.stdout
    finally:
        for proc in procs:
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(timeout=10)


def test_no_host_answering_is_its_own_exit_code(sshd, tmp_path):
    """Nothing listens on these: exit 6, not 3 (as for one missing py-spy), and no 'ranks missing: none'."""
    silent = f"{UNREACHABLE},127.0.0.9"
    argv = [a for a in _fleet_argv(sshd, tmp_path / "b", silent, host_timeout=6) if a != "--json"]
    done = subprocess.run(argv, capture_output=True, text=True, env=_env(), timeout=60)
    assert done.returncode == 6, done.stdout + done.stderr
    assert "ranks missing: none" not in done.stdout
    assert any("no host answered" in line and "2 asked" in line for line in done.stdout.splitlines()), done.stdout
    folded = [line for line in done.stdout.splitlines() if line.startswith("127.0.0.[4,9] (2): unreachable")]
    assert folded, done.stdout  # both hosts, one line, as clush -b folds them
    assert done.stderr == ""  # no progress lines when stderr is not a terminal


def test_late_host_keeps_partial_evidence_and_gdb_timeout_is_forwarded(sshd, fleet_job, tmp_path):
    """--gdb with a --gdb-timeout longer than the host's time: the hosts run late, and what they had
    (proc state, py-spy stacks) comes back marked partial instead of being deleted."""
    out = tmp_path / "late"
    argv = _fleet_argv(sshd, out, "127.0.0.[2-3]", host_timeout=8) + ["--gdb", "--gdb-timeout", "40"]
    done = subprocess.run(argv, capture_output=True, text=True, env=_env(), timeout=120)
    assert "--gdb-timeout 40 is not below --host-timeout 8" in done.stderr
    assert done.returncode == 3, done.stdout + done.stderr
    summary = json.loads(done.stdout)
    for host in ("127.0.0.2", "127.0.0.3"):
        info = summary["hosts"][host]
        assert info["status"] == "timeout" and info["evidence"] == "partial", info
        assert "answered late" in info["error"] and "partial evidence" in info["error"]
    assert summary["ranks"] == 4
    manifest = json.loads((out / "manifest.json").read_text())
    cmdlines = [h.get("error") for h in manifest["hosts"]]
    assert all("partial evidence" in (e or "") for e in cmdlines)
    names = {c["name"]: c["status"] for r in manifest["ranks"] for c in r["collectors"]}
    assert names.get("proc") == "ok" or "proc" not in names  # what ran before the deadline is kept
    assert any((out / f).is_file() for r in manifest["ranks"] for c in r["collectors"] for f in c["files"])
    time.sleep(2)
    for job_rank in fleet_job.ranks:  # never left stopped, whatever gdb was doing at the deadline
        state = Path(f"/proc/{job_rank.proc.pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
        assert state != "T" and job_rank.proc.poll() is None
    deadline = time.monotonic() + 60
    while _remote_collectors_running() and time.monotonic() < deadline:
        time.sleep(0.5)
    assert _remote_collectors_running() == []
