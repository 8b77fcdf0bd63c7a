"""Run a bisection for real: each round's group jobs at once, through a launcher.

Jobs start in their own session; one that outlives its time limit is a hang: its
whole process group gets SIGTERM, then SIGKILL after a short grace (srun and ssh
need the TERM to tear down remote steps; the local test processes die either way).
The state file is rewritten after every start and every finish, so killing the
runner at any point loses at most the jobs that were running.
"""

from __future__ import annotations

import os
import re
import secrets
import shlex
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TextIO

from forensics import safefs
from forensics.bisect import state as state_io
from forensics.bisect.engine import FINISHED, Bisection
from forensics.bisect.launchers import JobSpec, expand
from forensics.errors import ForensicsError

KILL_GRACE = 3.0
POLL = 0.2
TOKEN_VAR = "FORENSICS_BISECT_JOB_TOKEN"  #: in each job's environment: what proves a job left running is ours
TOKEN_RE = re.compile(r"[0-9a-f]{32}")
MAX_ENVIRON = 4 << 20  #: /proc/PID/environ read at most this far (the kernel's own argument limit is smaller)


@dataclass
class Running:
    """A started job and its bookkeeping."""

    group: dict[str, Any]
    proc: subprocess.Popen
    started: float
    log: Any


@dataclass
class Runner:
    """Drives a Bisection with real jobs; see module doc."""

    bis: Bisection
    state_path: Path
    launcher: Any
    template: str
    timeout: float
    port_base: int = 29500
    port_span: int = 100
    log_dir: Path | None = None
    progress: TextIO | None = sys.stderr
    stop_after_round: int | None = None
    extra_env: dict[str, str] = field(default_factory=dict)

    def save(self) -> None:
        state_io.save(self.bis.state, self.state_path)

    def say(self, text: str) -> None:
        if self.progress is not None:
            print(f"[bisect] {text}", file=self.progress, flush=True)

    def run(self) -> str:
        """Run rounds until decided; 'done', 'exhausted' (design gave up) or 'stopped'."""
        self.reap_orphans()
        while True:
            rnd = self.bis.open_round()
            if rnd is None:
                if self.stop_after_round is not None and len(self.bis.rounds) >= self.stop_after_round:
                    self.say(f"stopping after round {len(self.bis.rounds)} as asked; resume with the same --state")
                    return "stopped"
                if self.bis.finished():
                    return "done"
                rnd = self.bis.plan_next()
                if rnd is None:
                    return "exhausted"
                self.save()
                sizes = sorted({len(g["hosts"]) for g in rnd["groups"]})
                self.say(f"round {rnd['index'] + 1} ({rnd['kind']}): {len(rnd['groups'])} job(s) of "
                         f"{'/'.join(map(str, sizes))} host(s)")
            self.run_round(rnd)
            dec = self.bis.decision()
            self.say(f"after round {rnd['index'] + 1}: {len(dec.bad)} bad, {len(dec.good)} cleared, "
                     f"{len(dec.undecided)} undecided")

    def reap_orphans(self) -> None:
        """Kill jobs a previous, killed runner left behind (state 'running'), then rerun them.

        A runner killed with SIGKILL cannot stop its jobs, and a hung one would hold its
        hosts forever. But the state file is data, not proof: a pid and start time written there
        could name anyone's process. A group is killed only when its leader is that pid, started
        then, leads its own process group, and carries in its environment (/proc/PID/environ) the
        random token this bisect gave the job when it started it (TOKEN_VAR); else it is left alone.
        """
        for rnd in self.bis.rounds:
            for g in rnd["groups"]:
                if g["status"] != "running":
                    continue
                pid = g.get("pid")
                if isinstance(pid, int) and pid > 1 and _started_by_us(pid, g.get("pid_start"), g.get("token")):
                    self.say(f"killing {g['id']} (pid {pid}) left running by an interrupted run")
                    try:
                        os.killpg(pid, signal.SIGKILL)
                    except (ProcessLookupError, PermissionError):
                        pass
                elif pid is not None and _start_time(pid) is not None:
                    self.say(f"not signalling pid {pid} of {g['id']}: no proof this bisect started it")
                g["status"] = "pending"
        self.save()

    def run_round(self, rnd: dict[str, Any]) -> None:
        """Run every unfinished job of `rnd`, at most max_parallel at once."""
        pending = [g for g in rnd["groups"] if g["status"] not in FINISHED]
        limit = self.bis.settings.max_parallel or len(pending) or 1
        running: list[Running] = []
        try:
            while pending or running:
                while pending and len(running) < limit:
                    running.append(self.start(rnd, pending.pop(0)))
                    self.save()
                time.sleep(POLL)
                for job in list(running):
                    status = self.check(job)
                    if status is not None:
                        running.remove(job)
                        self.finish(rnd, job, status)
        except BaseException:
            for job in running:
                self.kill(job)
                job.group["status"] = "pending"
            self.save()
            raise

    def start(self, rnd: dict[str, Any], group: dict[str, Any]) -> Running:
        """Launch one group job in a new session, output to its log file."""
        state = self.bis.state
        port = self.port_base + state["jobs_started"] % max(1, self.port_span)
        state["jobs_started"] += 1
        gnum = int(group["id"].split("g")[-1])
        spec = JobSpec(group["hosts"], port, rnd["index"] + 1, gnum, self.timeout)
        argv = self.launcher.argv(expand(self.template, spec), spec)
        log_path = None
        log: Any = subprocess.DEVNULL
        if self.log_dir is not None:
            log_path, log = new_log(self.log_dir, group["id"])
            log.write(f"# forensics bisect job {group['id']}: {shlex.join(argv)}\n")
            log.flush()
        token = secrets.token_hex(16)  # the proof reap_orphans asks of a job left running (never a pid alone)
        env = {**os.environ, **self.extra_env, **spec.env(), TOKEN_VAR: token}
        try:
            proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
                                    start_new_session=True, env=env)
        except OSError as err:
            if log is not subprocess.DEVNULL:
                log.close()
            raise ForensicsError(f"cannot start {argv[0]!r}: {err.strerror or err}") from err
        group.update(status="running", log=str(log_path) if log_path else None, argv=argv,
                     pid=proc.pid, pid_start=_start_time(proc.pid), token=token)
        return Running(group, proc, time.monotonic(), log)

    def check(self, job: Running) -> str | None:
        """'pass'/'fail' when the job ended, 'hang' when it ran out of time, else None."""
        rc = job.proc.poll()
        if rc is not None:
            return "pass" if rc == 0 else "fail"
        if time.monotonic() - job.started > self.timeout:
            self.kill(job)
            return "hang"
        return None

    def kill(self, job: Running) -> None:
        """TERM the job's process group, then KILL it after a short grace."""
        for sig, wait in ((signal.SIGTERM, KILL_GRACE), (signal.SIGKILL, 5.0)):
            try:
                os.killpg(job.proc.pid, sig)
            except ProcessLookupError:
                break
            try:
                job.proc.wait(timeout=wait)
                break
            except subprocess.TimeoutExpired:
                continue
        try:  # stragglers that ignored TERM but outlived their leader
            os.killpg(job.proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass

    def finish(self, rnd: dict[str, Any], job: Running, status: str) -> None:
        """Record a job's outcome, persist, and report progress."""
        seconds = time.monotonic() - job.started
        if job.log is not subprocess.DEVNULL:
            job.log.close()
        self.bis.record(job.group, status, job.proc.returncode, seconds, job.group.get("log"))
        self.save()
        done = [g for g in rnd["groups"] if g["status"] in FINISHED]
        failed = sum(g["status"] == "fail" for g in done)
        hung = sum(g["status"] == "hang" for g in done)
        self.say(f"round {rnd['index'] + 1}: {job.group['id']} {status} in {seconds:.1f}s "
                 f"({len(job.group['hosts'])} hosts); {len(done)}/{len(rnd['groups'])} done, "
                 f"{failed} failed, {hung} hung")


def new_log(folder: Path, job_id: str) -> tuple[Path, TextIO]:
    """A new log file for one job in `folder` (O_CREAT|O_EXCL|O_NOFOLLOW): `<id>.log`, or `<id>.2.log`...
    when a resumed run starts the job again; an existing name is never followed or overwritten."""
    safefs.make_dirs(folder.parent, folder.name)
    for n in range(1, 1000):
        path = folder / (f"{job_id}.log" if n == 1 else f"{job_id}.{n}.log")
        if os.path.lexists(path):
            continue
        try:
            fd = safefs.create(path)
        except ForensicsError:
            continue
        return path, os.fdopen(fd, "w")
    raise ForensicsError(f"{folder}: no free log name for job {job_id}")


def _stat_fields(pid: int) -> list[str]:
    """/proc/PID/stat after the command name (field 3 on), [] if gone."""
    try:
        stat = Path(f"/proc/{int(pid)}/stat").read_text()
    except (OSError, ValueError):
        return []
    return stat[stat.rfind(")") + 2:].split()


def _start_time(pid: int) -> int | None:
    """Start time of `pid` in clock ticks since boot (/proc/PID/stat field 22), None if gone."""
    fields = _stat_fields(pid)
    return int(fields[19]) if len(fields) > 19 else None


def _started_by_us(pid: int, started: Any, token: Any) -> bool:
    """True only when `pid` started at `started`, leads its own process group, and holds TOKEN_VAR=token in
    its environment: a job this bisect started (start_new_session, the token put in its env by start)."""
    if not isinstance(token, str) or not TOKEN_RE.fullmatch(token):
        return False
    fields = _stat_fields(pid)
    if len(fields) <= 19 or fields[2] != str(pid) or fields[19] != str(started):
        return False  # another start time, or not the leader of its group (fields 5: pgrp)
    try:
        with open(f"/proc/{int(pid)}/environ", "rb") as fh:
            environ = fh.read(MAX_ENVIRON)
    except OSError:
        return False
    return f"{TOKEN_VAR}={token}".encode() in environ.split(b"\0")
