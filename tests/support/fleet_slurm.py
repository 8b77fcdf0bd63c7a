"""A one-node Slurm cluster (Debian slurm-wlm + munge) started by the tests, on private ports and paths.

munged runs as user munge on its own socket; slurmctld and slurmd run as root with a conf in a
temp folder (SlurmctldPort/SlurmdPort from the tests' port range). Clients find it through
SLURM_CONF in the environment this module hands out.
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path


def ensure_slurm() -> str | None:
    """Install slurm-wlm and munge when missing; a reason string when that is impossible."""
    needed = ["slurmctld", "slurmd", "srun", "sbatch", "scontrol", "munged"]
    if all(shutil.which(n) or os.path.exists(f"/usr/sbin/{n}") for n in needed):
        return None
    if os.geteuid() != 0 or not shutil.which("apt-get"):
        return "slurm-wlm missing and apt-get unavailable (needs root on Debian)"
    env = dict(os.environ, DEBIAN_FRONTEND="noninteractive")
    done = subprocess.run(["apt-get", "install", "-y", "--no-install-recommends", "slurm-wlm", "munge"], env=env,
                          capture_output=True, text=True)
    if done.returncode != 0:
        subprocess.run(["apt-get", "update"], env=env, capture_output=True)
        done = subprocess.run(["apt-get", "install", "-y", "--no-install-recommends", "slurm-wlm", "munge"], env=env,
                              capture_output=True, text=True)
    return None if done.returncode == 0 else f"apt-get install slurm-wlm munge failed: {done.stderr[-300:]}"


@dataclass
class OneNodeSlurm:
    root: Path
    ctld_port: int = 29980
    slurmd_port: int = 29981

    @property
    def env(self) -> dict[str, str]:
        return dict(os.environ, SLURM_CONF=str(self.root / "slurm.conf"))

    def start(self) -> "OneNodeSlurm":
        self.root.mkdir(parents=True, exist_ok=True)
        os.chmod(self.root, 0o755)  # munged runs as user munge: every folder above its key must be traversable
        munge = self.root / "munge"
        munge.mkdir(exist_ok=True)
        key = munge / "munge.key"
        key.write_bytes(os.urandom(128))
        shutil.chown(munge, "munge", "munge")
        shutil.chown(key, "munge", "munge")
        os.chmod(munge, 0o700)
        os.chmod(key, 0o400)
        self.socket = munge / "munge.socket"
        self.procs = [subprocess.Popen(["runuser", "-u", "munge", "--", "munged", "--foreground", "--force",
                                        f"--key-file={key}", f"--socket={self.socket}",
                                        f"--pid-file={munge / 'munged.pid'}", f"--log-file={munge / 'munged.log'}",
                                        f"--seed-file={munge / 'seed'}"],
                                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)]
        deadline = time.monotonic() + 10
        while not self.socket.exists() and time.monotonic() < deadline:
            if self.procs[0].poll() is not None:
                log = munge / "munged.log"
                raise RuntimeError(f"munged exited: {log.read_text()[-400:] if log.exists() else ''}")
            time.sleep(0.1)
        os.chmod(munge, 0o755)  # root daemons and clients must reach the socket
        node = subprocess.run(["slurmd", "-C"], capture_output=True, text=True, check=True).stdout.splitlines()[0]
        host = socket.gethostname().split(".")[0]
        for sub in ("state", "spool", "log"):
            (self.root / sub).mkdir(exist_ok=True)
        conf = [
            "ClusterName=forensics", f"SlurmctldHost={host}(127.0.0.1)", f"SlurmctldPort={self.ctld_port}",
            f"SlurmdPort={self.slurmd_port}",
            "AuthType=auth/munge", "CredType=cred/munge", f"AuthInfo=socket={self.socket}",
            "ProctrackType=proctrack/linuxproc", "TaskPlugin=task/none", "SelectType=select/cons_tres",
            "SelectTypeParameters=CR_Core", "SlurmUser=root", "SlurmdUser=root", "ReturnToService=2", "MpiDefault=none",
            f"StateSaveLocation={self.root / 'state'}", f"SlurmdSpoolDir={self.root / 'spool'}",
            f"SlurmctldLogFile={self.root / 'log' / 'ctld.log'}", f"SlurmdLogFile={self.root / 'log' / 'slurmd.log'}",
            f"SlurmctldPidFile={self.root / 'ctld.pid'}", f"SlurmdPidFile={self.root / 'slurmd.pid'}",
            "SchedulerType=sched/builtin", "JobCompType=jobcomp/none", "AccountingStorageType=accounting_storage/none",
            f"{node} State=UNKNOWN",
            f"PartitionName=debug Nodes={host} Default=YES MaxTime=INFINITE State=UP OverSubscribe=YES",
        ]
        (self.root / "slurm.conf").write_text("\n".join(conf) + "\n")
        conf_arg = str(self.root / "slurm.conf")
        for daemon in ("slurmctld", "slurmd"):  # in the foreground, so stop() can end and reap them
            self.procs.append(subprocess.Popen([daemon, "-D", "-f", conf_arg], env=self.env, stdout=subprocess.DEVNULL,
                                               stderr=subprocess.DEVNULL, start_new_session=True))
        self._wait_idle()
        return self

    def _wait_idle(self, timeout: float = 40.0) -> None:
        deadline = time.monotonic() + timeout
        last = ""
        while time.monotonic() < deadline:
            done = subprocess.run(["sinfo", "-h", "-o", "%t"], capture_output=True, text=True, env=self.env)
            last = done.stdout.strip() + done.stderr.strip()
            if done.returncode == 0 and last.startswith(("idle", "mix", "alloc")):
                return
            time.sleep(0.5)
        log = self.root / "log" / "ctld.log"
        raise RuntimeError(f"slurm node not idle after {timeout} s: {last}; log: "
                           f"{log.read_text()[-600:] if log.exists() else ''}")

    def sbatch(self, script: str) -> str:
        done = subprocess.run(["sbatch", "--parsable", "-o", str(self.root / "job-%j.out")], input=script,
                              capture_output=True, text=True, env=self.env, check=True)
        return done.stdout.strip().split(";")[0]

    def wait_running(self, job: str, timeout: float = 30.0) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            state = subprocess.run(["squeue", "-h", "-j", job, "-o", "%T"], capture_output=True, text=True,
                                   env=self.env).stdout.strip()
            if state == "RUNNING":
                return
            time.sleep(0.3)
        raise RuntimeError(f"job {job} not running after {timeout} s")

    def cancel(self, job: str) -> None:
        subprocess.run(["scancel", job], env=self.env, capture_output=True)

    def stop(self) -> None:
        """Cancel every job (its steps end with it), then end the three daemons by their pid files."""
        if (self.root / "ctld.pid").exists():
            subprocess.run(["scancel", "--full", "--user=root"], env=self.env, capture_output=True, timeout=30)
            time.sleep(1.0)
        for proc in reversed(getattr(self, "procs", [])):
            if proc.poll() is None:
                os.killpg(proc.pid, 9)
            proc.wait(timeout=10)
        try:  # munged drops to user munge under runuser: end it by its pid file too
            os.kill(int((self.root / "munge" / "munged.pid").read_text().split()[0]), 9)
        except (OSError, ValueError, IndexError):
            pass
