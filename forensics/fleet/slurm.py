"""Runs the per-host collector inside a Slurm job's allocation: `srun --overlap --jobid J`.

--overlap lets the collection step share the CPUs the hung job holds (without it the
step would wait for resources the job never frees). One task per node, output
labelled by task (`--label`), and each task's answer names its host. The job id is
checked to be a plain Slurm id before it reaches any argv.
"""

from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
import time
from typing import Callable

from forensics.errors import ForensicsError
from forensics.fleet import wire
from forensics.fleet.command import for_host
from forensics.fleet.hosts import expand_nodeset, fold
from forensics.fleet.options import check_srun_args
from forensics.fleet.outcome import HostRun

_JOB = re.compile(r"^[0-9]+(?:_[0-9]+)?(?:\+[0-9]+)?$")  # 1234, array 1234_7, het job 1234+0
_LABEL = re.compile(r"^\s*(\d+): ?(.*)$")


def check_job_id(job: str) -> str:
    if not _JOB.match(str(job)):
        raise ForensicsError(f"--slurm-job {job!r}: not a Slurm job id (digits, e.g. 4242 or 4242_3)")
    return str(job)


def scontrol_argv(job: str) -> list[str]:
    return ["scontrol", "show", "job", "--oneliner", check_job_id(job)]


def parse_scontrol(text: str) -> tuple[str, list[str]]:
    """(JobState, nodes) from `scontrol show job --oneliner` output."""
    fields = dict(tok.split("=", 1) for tok in text.split() if "=" in tok)
    state = fields.get("JobState", "UNKNOWN")
    nodelist = fields.get("NodeList", "")
    if not nodelist or nodelist == "(null)":
        return state, []
    return state, expand_nodeset(nodelist)


def slurm_hosts(job: str) -> list[str]:
    """Nodes of a running job; a clear error when it is pending, finished or unknown."""
    try:
        done = subprocess.run(scontrol_argv(job), capture_output=True, text=True, timeout=30)
    except FileNotFoundError as err:
        raise ForensicsError("--slurm-job: scontrol not found (is this a Slurm login node?)") from err
    except subprocess.TimeoutExpired as err:
        raise ForensicsError("--slurm-job: scontrol did not answer in 30 s") from err
    if done.returncode != 0:
        raise ForensicsError(f"--slurm-job {job}: {done.stderr.strip() or 'scontrol failed'}")
    state, nodes = parse_scontrol(done.stdout)
    if state != "RUNNING" or not nodes:
        raise ForensicsError(f"--slurm-job {job}: job is {state}; only a running job's nodes can be collected")
    return nodes


def srun_argv(job: str, hosts: list[str], remote: list[str], timeout: float,
              extra: list[str] | None = None) -> list[str]:
    """srun argv: one task on each of `hosts` inside job `job`'s allocation, sharing its resources.

    `extra` (the user's --srun-arg values, e.g. pyxis' --container-image) go after ours,
    so they can adjust the step (srun takes the last value of an option).
    """
    nodes = fold(hosts)
    return [
        "srun", "--overlap", f"--jobid={check_job_id(job)}",
        f"--nodelist={nodes}", f"--nodes={len(hosts)}", f"--ntasks={len(hosts)}", "--ntasks-per-node=1",
        "--label", "--kill-on-bad-exit=0", "--unbuffered", "--quiet",
        f"--time={max(1, int(timeout // 60) + 1)}",
        *check_srun_args(extra or []),
        *for_host(remote, "slurm"),
    ]


def split_labelled(lines: list[str]) -> dict[int, list[str]]:
    """Demultiplex `srun --label` output ('3: text') into lines per task."""
    tasks: dict[int, list[str]] = {}
    for line in lines:
        match = _LABEL.match(line)
        if match:
            tasks.setdefault(int(match.group(1)), []).append(match.group(2))
    return tasks


def runs_from_output(hosts: list[str], stdout: list[str], stderr: list[str], returncode: int | None, seconds: float,
                     timed_out: bool) -> dict[str, HostRun]:
    """One HostRun per host: a task's answer is filed under the host its header names."""
    runs = {h: HostRun(host=h, stderr=list(stderr), returncode=returncode, seconds=seconds,
                       timed_out=timed_out) for h in hosts}
    for task_lines in split_labelled(stdout).values():
        try:
            host = wire.decode(task_lines).header.get("host")
        except wire.WireError:
            continue
        short = {h.split(".", 1)[0]: h for h in hosts}
        target = host if host in runs else short.get(str(host))
        if target:
            runs[target].stdout = task_lines
            runs[target].timed_out = False
            runs[target].returncode = 0
    return runs


def srun_runner(job: str, extra: list[str] | None = None) -> Callable:
    """A fleet Runner that uses srun instead of ssh (the cleanup pass is a no-op: Slurm ends the step)."""

    def run(hosts: list[str], argv: list[str], timeout: float,
            on_done: Callable[[HostRun], None]) -> dict[str, HostRun]:
        if shutil.which("srun") is None:
            raise ForensicsError("--slurm-job: srun not found (is this a Slurm login node?)")
        if "--cleanup" in argv:
            return {h: HostRun(host=h, returncode=0) for h in hosts}
        full = srun_argv(job, hosts, argv, timeout, extra)
        start = time.monotonic()
        proc = subprocess.Popen(full, stdout=subprocess.PIPE, stderr=subprocess.PIPE, stdin=subprocess.DEVNULL,
                                text=True, errors="replace", start_new_session=True)
        timed_out = False
        try:
            out, err = proc.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            timed_out = True
            _end_step(proc)
            out, err = proc.communicate()
        runs = runs_from_output(hosts, out.splitlines(), err.splitlines(), proc.returncode,
                                round(time.monotonic() - start, 3), timed_out)
        for r in runs.values():
            on_done(r)
        return runs

    return run


def _end_step(proc: subprocess.Popen) -> None:
    """Two SIGINTs make srun cancel its step on every node at once (srun(1)); SIGKILL if it lingers."""
    for _ in range(2):
        try:
            os.killpg(proc.pid, signal.SIGINT)
        except ProcessLookupError:
            return
        time.sleep(0.3)
    try:
        proc.wait(timeout=5)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
