"""Builds the remote collector command and the ssh options, with no way to inject shell.

ssh hands its command to the remote user's shell as one string, so every argument
is quoted with shlex.quote here, after the {host} placeholder has been replaced by a
host name (validated by fleet.hosts, so it cannot carry shell syntax either). Host
names reach ssh as argv entries, never through a shell, and cannot start with '-'.

SSH options (each documented in ssh_config(5)) always used:
  BatchMode=yes          never prompt for a password or passphrase: fail instead
  ConnectTimeout=N       give up connecting after N s (N from --host-timeout)
  ServerAliveInterval=5, ServerAliveCountMax=2
                         notice a host that stops answering mid-collection
  ForwardAgent=no, ForwardX11=no (added by ClusterShell)
StrictHostKeyChecking is left to the user's ssh configuration (known_hosts, as for
any ssh use); pass `--ssh-option StrictHostKeyChecking=accept-new` to accept new keys.
"""

from __future__ import annotations

import re
import shlex
from dataclasses import dataclass, field

from forensics.errors import ForensicsError
from forensics.fleet.options import check_ssh_option, check_ssh_options  # noqa: F401 - the one checker

REMOTE_MODULE = "forensics.fleet.remote"
HOST_PLACEHOLDER = "{host}"

_ENV_KEY = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


@dataclass
class RemoteSpec:
    """What the collector on each host should do; turned into argv by remote_argv()."""

    python: str = "python3"
    tag: str = "fleet"
    deadline: float = 20.0
    timeout: float = 10.0
    native: bool = False
    gdb: bool = False
    match_env: list[str] = field(default_factory=list)
    env: dict[str, str] = field(default_factory=dict)
    gdb_timeout: float | None = None  #: the user's --gdb-timeout; None: the collector picks from its deadline
    job: str | None = None  #: the user's --job (only ranks of this job)
    samples: int = 0  #: the user's --samples (py-spy stack samples per rank)
    sample_interval: float = 0.1  #: the user's --sample-interval
    second_look: float = 3.0  #: the user's --second-look (0: off)
    #: the user's --max-mib, --rank-max-mib and --host-max-mib (by option); one left out: the host's default
    caps_mib: dict[str, int] = field(default_factory=dict)


def ssh_options(user_options: list[str], connect_timeout: float) -> list[str]:
    """The ssh argv options: the user's first (ssh keeps the first value of an option), then ours."""
    options: list[str] = []
    for option in check_ssh_options(user_options):
        options += ["-o", option]
    options += [
        "-o", f"ConnectTimeout={max(1, int(round(connect_timeout)))}",
        "-o", "BatchMode=yes",
        "-o", "ServerAliveInterval=5",
        "-o", "ServerAliveCountMax=2",
    ]
    return options


def check_match_env(item: str) -> str:
    """'KEY=VALUE' with a plain variable name; VALUE may hold {host}."""
    key, sep, _ = item.partition("=")
    if not sep or not _ENV_KEY.match(key):
        raise ForensicsError(f"--match-env {item!r}: expected NAME=VALUE")
    return item


#: collect's byte caps, forwarded to each host's collector when the user set them (forensics.collect.budget)
CAP_FLAGS = ("--max-mib", "--rank-max-mib", "--host-max-mib")


def remote_argv(spec: RemoteSpec) -> list[str]:
    """argv of the collector on a host; may contain the {host} placeholder."""
    argv = ["env"] if spec.env else []
    for key, value in spec.env.items():
        if not _ENV_KEY.match(key):
            raise ForensicsError(f"environment name {key!r} is not valid")
        argv.append(f"{key}={value}")
    argv += [spec.python, "-m", REMOTE_MODULE, "--tag", spec.tag, "--deadline", f"{spec.deadline:g}", "--timeout",
             f"{spec.timeout:g}"]
    if spec.native:
        argv.append("--native")
    if spec.gdb:
        argv.append("--gdb")
    if spec.gdb_timeout is not None:
        argv += ["--gdb-timeout", f"{spec.gdb_timeout:g}"]
    if spec.job:
        argv += ["--job", spec.job]
    if spec.samples:
        argv += ["--samples", str(int(spec.samples)), "--sample-interval", f"{spec.sample_interval:g}"]
    argv += ["--second-look", f"{float(spec.second_look):g}"]
    for flag, mib in sorted(spec.caps_mib.items()):
        if flag not in CAP_FLAGS:
            raise ForensicsError(f"{flag}: not a byte cap of collect")
        argv += [flag, str(int(mib))]
    for item in spec.match_env:
        argv += ["--match-env", check_match_env(item)]
    return argv


def shell_command(argv: list[str]) -> str:
    """One shell string for ssh's remote shell, every argument quoted (ssh joins argv with spaces)."""
    return " ".join(shlex.quote(a) for a in argv)


def for_host(argv: list[str], host: str) -> list[str]:
    """argv with {host} replaced by a (validated) host name: for srun and the sequential baseline."""
    return [a.replace(HOST_PLACEHOLDER, host) for a in argv]


def cleanup_argv(spec: RemoteSpec) -> list[str]:
    """argv that ends a collector of this tag still running on a host (after a time-out)."""
    return [spec.python, "-m", REMOTE_MODULE, "--tag", spec.tag, "--cleanup"]
