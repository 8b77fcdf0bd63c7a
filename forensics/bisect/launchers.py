"""Turn one group job into an argv list for a local process, ssh, or Slurm srun.

No shell ever sees a host name or the user's command unquoted: the --test template
is split once with shlex, placeholders are replaced inside single arguments, and for
ssh (whose remote side does go through a shell) the argv is joined with shlex quoting.
Host names are checked against a strict pattern, so '-oProxyCommand=...' cannot pass.
"""

from __future__ import annotations

import math
import shlex
from dataclasses import dataclass, field
from typing import Sequence

from forensics import hostset
from forensics.errors import ForensicsError
from forensics.fleet.options import check_srun_args, check_ssh_options
from parsers.input.errors import UsageError
PLACEHOLDERS = ("{hosts}", "{nnodes}", "{port}", "{round}", "{group}", "{first}", "{host}")


class LaunchError(UsageError):
    """A host name or template that cannot be launched safely."""


def check_host(host: str) -> str:
    """Return `host` if it is a plain host name; refuse anything an option parser could eat."""
    try:
        return hostset.validate_host(host)
    except hostset.HostSetError as err:
        raise LaunchError(f"refusing unsafe host name {host!r}") from err


@dataclass
class JobSpec:
    """What one group job needs to start."""

    hosts: list[str]
    port: int
    round: int
    group: int
    timeout: float

    def values(self) -> dict[str, str]:
        """Placeholder values, each substituted inside single argv elements."""
        return {"{hosts}": ",".join(self.hosts), "{nnodes}": str(len(self.hosts)),
                "{port}": str(self.port), "{round}": str(self.round), "{group}": str(self.group),
                "{first}": self.hosts[0], "{host}": self.hosts[0]}

    def env(self) -> dict[str, str]:
        """The same facts as environment variables, for test programs that prefer them."""
        return {"FORENSICS_BISECT_HOSTS": ",".join(self.hosts),
                "FORENSICS_BISECT_NNODES": str(len(self.hosts)),
                "FORENSICS_BISECT_PORT": str(self.port),
                "FORENSICS_BISECT_ROUND": str(self.round),
                "FORENSICS_BISECT_GROUP": str(self.group)}


def split_template(template: str) -> list[str]:
    """Split the --test template like a shell would, once, without running one."""
    try:
        argv = shlex.split(template)
    except ValueError as err:
        raise LaunchError(f"cannot parse test command {template!r}: {err}") from err
    if not argv:
        raise LaunchError("the test command is empty")
    return argv


def expand(template: str, spec: JobSpec) -> list[str]:
    """argv of the user's test for one group: placeholders replaced per argument."""
    for h in spec.hosts:
        check_host(h)
    out = []
    for arg in split_template(template):
        for key, value in spec.values().items():
            arg = arg.replace(key, value)
        out.append(arg)
    return out


@dataclass
class LocalLauncher:
    """Runs the test on this machine (the test itself reaches the hosts, e.g. torchrun)."""

    name: str = "local"

    def argv(self, test_argv: list[str], spec: JobSpec) -> list[str]:
        return list(test_argv)


@dataclass
class SSHLauncher:
    """Runs the test on the group's first host over ssh, bounded there by `timeout`.

    The remote `timeout -k 5` matters: killing the local ssh client does not stop the
    remote command, so without it a hung test would outlive its group.
    """

    options: list[str] = field(default_factory=list)  #: Key=value ssh options (--ssh-option), allow-listed
    user: str | None = None
    name: str = "ssh"

    def argv(self, test_argv: list[str], spec: JobSpec) -> list[str]:
        host = check_host(spec.hosts[0])
        dest = f"{check_host(self.user)}@{host}" if self.user else host
        limit = max(1, math.ceil(spec.timeout))
        remote = shlex.join(["timeout", "-k", "5", str(limit), *test_argv])
        user_options = [w for o in _checked(check_ssh_options, self.options) for w in ("-o", o)]
        return ["ssh", "-o", "BatchMode=yes", "-o", "ConnectTimeout=10", *user_options, "--", dest, remote]


@dataclass
class SlurmLauncher:
    """Runs the test as a job step on exactly the group's nodes with `srun --nodelist`."""

    extra: list[str] = field(default_factory=list)
    name: str = "slurm"

    def argv(self, test_argv: list[str], spec: JobSpec) -> list[str]:
        nodes = hostset.fold([check_host(h) for h in spec.hosts])
        minutes = max(1, math.ceil(spec.timeout / 60))
        return ["srun", f"--nodelist={nodes}", f"--nodes={len(spec.hosts)}",
                f"--time={minutes}", f"--job-name=bisect-r{spec.round}-g{spec.group}",
                "--kill-on-bad-exit=1", *_checked(check_srun_args, self.extra), *test_argv]


def _checked(checker, values: Sequence[str]) -> list[str]:
    """The shared fan-out option checker (forensics.fleet.options), its error as a LaunchError."""
    try:
        return checker(values)
    except ForensicsError as err:
        raise LaunchError(str(err)) from err


def make_launcher(kind: str, ssh_options: Sequence[str] = (), srun_args: Sequence[str] = ()):
    """The launcher named on the command line; every --ssh-option/--srun-arg value is checked here,
    wherever it came from, with the same allow-lists as collect's."""
    ssh_options, srun_args = _checked(check_ssh_options, ssh_options), _checked(check_srun_args, srun_args)
    if kind == "local":
        return LocalLauncher()
    if kind == "ssh":
        return SSHLauncher(options=list(ssh_options))
    if kind == "slurm":
        return SlurmLauncher(extra=list(srun_args))
    raise LaunchError(f"unknown launcher {kind!r} (local, ssh or slurm)")


def expand_hosts(pattern: str) -> list[str]:
    """'node[001-048],gpu7' -> host names through the one checked expander (forensics.hostset)."""
    try:
        return hostset.expand(pattern)
    except hostset.HostSetError as err:
        raise LaunchError(str(err)) from err
