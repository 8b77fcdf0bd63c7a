"""The one checker of the ssh and srun options a user passes through (collect and bisect alike).

`--ssh-option` and `--srun-arg` values end up in the argv of ssh or srun, run as root on
the collecting machine. Several ssh options run a local command or load code
(ProxyCommand, LocalCommand, KnownHostsCommand, Match exec, PKCS11Provider, ...) and
several srun options run programs or write files (--prolog, --task-epilog, --output,
--bcast, ...), and any srun value that does not start with '-' would take the place of
the command that follows it. So both are checked against allow-lists of options that
only tune the connection or the job step; everything else is refused with a message
that says which options are allowed.
"""

from __future__ import annotations

import re
from typing import Iterable

from forensics.errors import ForensicsError

MAX_VALUE = 4096  #: characters of one option value

#: ssh_config(5) keywords that only tune how the connection is made (compared case-insensitively)
SSH_ALLOWED = frozenset(k.lower() for k in (
    "AddressFamily", "BatchMode", "BindAddress", "BindInterface", "CASignatureAlgorithms", "CertificateFile",
    "CheckHostIP", "Ciphers", "Compression", "ConnectionAttempts", "ConnectTimeout", "FingerprintHash",
    "GlobalKnownHostsFile", "GSSAPIAuthentication", "GSSAPIDelegateCredentials", "HashKnownHosts",
    "HostbasedAcceptedAlgorithms", "HostbasedAuthentication", "HostKeyAlgorithms", "HostKeyAlias",
    "IdentitiesOnly", "IdentityFile", "IPQoS", "KbdInteractiveAuthentication", "KexAlgorithms", "LogLevel",
    "MACs", "NoHostAuthenticationForLocalhost", "NumberOfPasswordPrompts", "PasswordAuthentication", "Port",
    "PreferredAuthentications", "PubkeyAcceptedAlgorithms", "PubkeyAcceptedKeyTypes", "PubkeyAuthentication",
    "RekeyLimit", "RequiredRSASize", "ServerAliveCountMax", "ServerAliveInterval", "StrictHostKeyChecking",
    "TCPKeepAlive", "UpdateHostKeys", "User", "UserKnownHostsFile", "VerifyHostKeyDNS",
))
_SSH_OPTION = re.compile(r"^([A-Za-z][A-Za-z0-9]{0,63})=([^\s\x00-\x1f\x7f]{0,%d})$" % MAX_VALUE)

#: srun long options that only shape the job step (pyxis container options included); no
#: option that runs a program (--prolog, --epilog, --task-prolog, --task-epilog), copies
#: or writes files (--bcast, --output, --error, --input, --container-save), or changes
#: what runs (--export, --chdir, --container-entrypoint)
SRUN_VALUED = frozenset((
    "account", "constraint", "container-image", "container-mounts", "container-workdir", "container-name",
    "container-env", "cpu-bind", "cpus-per-task", "gpus", "gpus-per-node", "gpus-per-task", "gres", "mem",
    "mem-bind", "mem-per-cpu", "mem-per-gpu", "mpi", "network", "partition", "qos", "reservation", "comment",
    "wckey", "cluster", "clusters", "distribution", "hint", "threads-per-core", "jobid", "cpus-per-gpu",
    "ntasks-per-node",
))  #: taken only as --name=value (a bare --name would eat the next argv word as its value)
SRUN_FLAGS = frozenset((
    "container-mount-home", "no-container-mount-home", "container-remap-root", "no-container-remap-root",
    "container-writable", "container-readonly", "exact", "exclusive", "overlap", "verbose",
))  #: taken only bare
_SRUN_OPTION = re.compile(r"^--([a-z][a-z0-9-]{0,63})(?:=([^\x00-\x1f\x7f]{0,%d}))?$" % MAX_VALUE)


def check_ssh_option(option: object) -> str:
    """Accept one `Key=value` whose key is on the allow-list; refuse everything else."""
    match = _SSH_OPTION.match(option) if isinstance(option, str) else None
    if not match:
        raise ForensicsError(f"--ssh-option {option!r}: expected Key=value as in ssh_config(5), e.g. Port=2222 "
                             "(no spaces or control characters)")
    if match.group(1).lower() not in SSH_ALLOWED:
        raise ForensicsError(f"--ssh-option {option!r}: {match.group(1)} is not allowed (only options that tune the "
                             "connection, e.g. Port, User, IdentityFile, ConnectTimeout, StrictHostKeyChecking, "
                             "UserKnownHostsFile; put others in your ssh_config)")
    return option  # type: ignore[return-value]


def check_ssh_options(options: Iterable[object]) -> list[str]:
    """Every value checked, not only the first."""
    return [check_ssh_option(o) for o in options]


def check_srun_arg(arg: object) -> str:
    """Accept one `--name` or `--name=value` whose name is on the allow-list.

    A value must be joined with '=': a separate word would be read by srun as the
    command to run.
    """
    match = _SRUN_OPTION.match(arg) if isinstance(arg, str) else None
    if not match:
        raise ForensicsError(f"--srun-arg {arg!r}: expected one srun long option such as --container-image=IMG "
                             "or --partition=debug (value joined with '=', no control characters)")
    name, valued = match.group(1), match.group(2) is not None
    if (name in SRUN_VALUED and not valued) or (name in SRUN_FLAGS and valued):
        raise ForensicsError(f"--srun-arg {arg!r}: --{name} "
                             + ("needs =VALUE" if name in SRUN_VALUED else "takes no value"))
    if name not in SRUN_VALUED and name not in SRUN_FLAGS:
        raise ForensicsError(f"--srun-arg {arg!r}: --{match.group(1)} is not allowed (only options that shape the "
                             "job step, e.g. --container-image, --container-mounts, --partition, --gres)")
    return arg  # type: ignore[return-value]


def check_srun_args(args: Iterable[object]) -> list[str]:
    """Every value checked, not only the first."""
    return [check_srun_arg(a) for a in args]
