"""A real OpenSSH server on loopback for the fleet tests: throwaway keys, many 127.0.0.x "hosts".

One sshd listens on several loopback addresses; each address is a separate host to ssh.
`slow` addresses get a ForceCommand that sleeps, so they accept the login and never answer
in time. Addresses in no list have nothing listening: connection refused, an unreachable host.
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

SSHD = "/usr/sbin/sshd"
MAX_LISTEN = 16  #: sshd refuses more listen sockets (MAX_LISTEN_SOCKS)
REPO = Path(__file__).resolve().parents[2]


def ensure_openssh() -> str | None:
    """Install Debian's openssh-server when missing; return a reason string when impossible."""
    if os.path.exists(SSHD) and shutil.which("ssh") and shutil.which("ssh-keygen"):
        return None
    if os.geteuid() != 0 or not shutil.which("apt-get"):
        return "openssh-server missing and apt-get unavailable (needs root on Debian)"
    env = dict(os.environ, DEBIAN_FRONTEND="noninteractive")
    for argv in (["apt-get", "update"],
                 ["apt-get", "install", "-y", "--no-install-recommends", "openssh-server", "openssh-client"]):
        done = subprocess.run(argv, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        if done.returncode != 0:
            return f"{' '.join(argv)} failed: {done.stderr[-300:]}"
    return None if os.path.exists(SSHD) else "openssh-server installed but /usr/sbin/sshd absent"


@dataclass
class LoopbackSshd:
    root: Path
    port: int
    addresses: list[str]
    slow: list[str] = field(default_factory=list)
    slow_seconds: float = 30.0
    proc: subprocess.Popen | None = None

    @property
    def key(self) -> Path:
        return self.root / "client_key"

    @property
    def ssh_options(self) -> list[str]:
        """Options for `forensics collect --ssh-option`: this server's port and key, throwaway host keys."""
        return [
            f"Port={self.port}",
            f"IdentityFile={self.key}",
            "IdentitiesOnly=yes",
            "UserKnownHostsFile=/dev/null",
            "StrictHostKeyChecking=no",
            "LogLevel=ERROR",
        ]

    @property
    def remote_python(self) -> str:
        """A python for the 'remote' side that imports this checkout (ssh sessions start with a bare env)."""
        return str(self.root / "remote-python")

    def start(self) -> "LoopbackSshd":
        self.root.mkdir(parents=True, exist_ok=True)
        os.chmod(self.root, 0o700)
        for name in ("host_key", "client_key"):
            subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(self.root / name)], check=True)
        shutil.copy(self.root / "client_key.pub", self.root / "authorized_keys")
        wrapper = self.root / "remote-python"
        wrapper.write_text(f"#!/bin/sh\nPYTHONPATH={REPO} exec {sys.executable} \"$@\"\n")
        wrapper.chmod(0o755)
        slow_lines = []
        for addr in self.slow:
            slow_lines += [f"Match LocalAddress {addr}", f"    ForceCommand sleep {self.slow_seconds:g}"]
        Path("/run/sshd").mkdir(mode=0o755, exist_ok=True)
        every = [*self.addresses, *self.slow]
        self.procs = []
        for n, first in enumerate(range(0, len(every), MAX_LISTEN)):  # sshd listens on at most 16 sockets
            lines = [
                f"Port {self.port}",
                *[f"ListenAddress {a}" for a in every[first : first + MAX_LISTEN]],
                f"HostKey {self.root / 'host_key'}",
                f"AuthorizedKeysFile {self.root / 'authorized_keys'}",
                f"PidFile {self.root / f'sshd{n}.pid'}",
                "StrictModes no", "PermitRootLogin yes", "PasswordAuthentication no",
                "KbdInteractiveAuthentication no", "UsePAM no", "MaxStartups 300:30:400", "MaxSessions 300",
                *slow_lines,
            ]
            config = self.root / f"sshd{n}_config"
            config.write_text("\n".join(lines) + "\n")
            log = open(self.root / f"sshd{n}.log", "wb")
            self.procs.append(subprocess.Popen([SSHD, "-D", "-e", "-f", str(config)], stdout=log, stderr=log,
                                               start_new_session=True))
        self.proc = self.procs[0]
        self._wait_listening()
        return self

    def _wait_listening(self, timeout: float = 15.0) -> None:
        deadline = time.monotonic() + timeout
        pending = list(self.addresses)
        while pending and time.monotonic() < deadline:
            for n, proc in enumerate(self.procs):
                if proc.poll() is not None:
                    raise RuntimeError(f"sshd exited: {(self.root / f'sshd{n}.log').read_text()[-800:]}")
            try:
                with socket.create_connection((pending[0], self.port), timeout=1):
                    pending.pop(0)
            except OSError:
                time.sleep(0.1)
        if pending:
            raise RuntimeError(f"sshd not listening on {pending} after {timeout} s")

    def stop(self) -> None:
        for proc in getattr(self, "procs", []):
            if proc.poll() is None:
                os.killpg(proc.pid, 9)  # each sshd leads its own session: ends it and any session it forked
            proc.wait(timeout=10)


# ---- the session fixture (imported by the test modules that need it; no conftest.py, so the
# suite's own tests/conftest.py is never shadowed) ----
import pytest  # noqa: E402



def free_port(addresses: list[str], tries: int = 50) -> int:
    """A port no socket holds on any of `addresses`: a fixed port met a stale sshd left by an earlier, killed run
    (its publickey refusals failed the fleet tests) and collides with a second test run beside this one."""
    for _ in range(tries):
        with socket.socket() as probe:
            probe.bind((addresses[0], 0))
            port = probe.getsockname()[1]
        if all(_bindable(addr, port) for addr in addresses):
            return port
    raise RuntimeError(f"no port free on all of {addresses} after {tries} tries")


def _bindable(addr: str, port: int) -> bool:
    with socket.socket() as probe:
        try:
            probe.bind((addr, port))
        except OSError:
            return False
    return True

HOSTS = ["127.0.0.2", "127.0.0.3"]
SLOW = ["127.0.0.5"]
UNREACHABLE = "127.0.0.4"
SLOW_SECONDS = 20  #: longer than any --host-timeout the tests use


@pytest.fixture(scope="session")
def sshd(tmp_path_factory):
    """A loopback sshd for HOSTS (+ SLOW hosts that never answer in time); UNREACHABLE has no listener."""
    reason = ensure_openssh()
    if reason:
        pytest.skip(reason)
    server = LoopbackSshd(tmp_path_factory.mktemp("sshd"), free_port([*HOSTS, *SLOW]), HOSTS, slow=SLOW,
                          slow_seconds=SLOW_SECONDS)
    try:
        server.start()
        yield server
    finally:
        server.stop()
