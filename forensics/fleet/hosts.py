"""Host sets: NodeSet syntax (`node[001-512]`), host files, and host-name validation.

Every host name ends up as an argument of ssh, scp or srun, so names are checked
against a strict pattern first: a name that starts with '-' would be read as an
option, and one with spaces or shell characters has no business in a host list.
"""

from __future__ import annotations

from pathlib import Path

from forensics import hostset
from forensics.errors import ForensicsError

MAX_HOSTFILE_BYTES = 16 * 1024 * 1024  #: a host file larger than this is not a host file


def validate_host(name: str) -> str:
    """Return `name` if it is a plain host name or IPv4 address; raise ForensicsError otherwise."""
    try:
        return hostset.validate_host(name)
    except hostset.HostSetError as err:
        raise ForensicsError(str(err)) from err


def expand_nodeset(text: str) -> list[str]:
    """Expand NodeSet syntax ('node[001-004],gpu[1-2]') into validated host names.

    Goes through the one checked expander (forensics.hostset): syntax and size are
    checked before ClusterShell sees the text, and its @group upcalls are off.
    """
    try:
        return hostset.expand(text)
    except hostset.HostSetError as err:
        raise ForensicsError(f"--hosts: {err}") from err


def hostfile_lines(path: Path) -> list[tuple[int, str]]:
    """(line number, host-set text) of a host file, syntax-checked, not yet expanded.

    One host or NodeSet expression per line; '#' comments and MPI 'slots=' suffixes ignored.
    """
    try:
        with open(path, "rb") as fh:
            text = fh.read(MAX_HOSTFILE_BYTES + 1).decode("utf-8", "replace")
    except OSError as err:
        raise ForensicsError(f"--hostfile {path}: {err.strerror or err}") from err
    if len(text) > MAX_HOSTFILE_BYTES:
        raise ForensicsError(f"--hostfile {path}: larger than {MAX_HOSTFILE_BYTES} bytes")
    lines: list[tuple[int, str]] = []
    for number, raw in enumerate(text.splitlines(), 1):
        line = raw.split("#", 1)[0].strip()
        if not line:
            continue
        first = line.split()[0]  # "node01 slots=8" (Open MPI / DeepSpeed hostfiles)
        try:
            lines.append((number, hostset.check_syntax(first)))
        except hostset.HostSetError as err:
            raise ForensicsError(f"{path}:{number}: --hosts: {err}") from err
    return lines


def gather(expressions: list[str], hostfile: Path | None = None, after: list[str] | None = None) -> list[str]:
    """All hosts of --hosts values, a host file's lines, then `after` (e.g. a Slurm node list),
    in that order, under ONE cap (hostset.MAX_HOSTS in all).

    Every expression is checked and counted before any is expanded, so forty lines of
    `n[1-100000]` are refused at once rather than expanded to 4,000,000 names.
    """
    texts = list(expressions)
    if hostfile is not None:
        texts += [text for _, text in hostfile_lines(hostfile)]
    texts += list(after or [])
    try:
        return hostset.expand_all(texts)
    except hostset.HostSetError as err:
        where = f"--hostfile {hostfile}" if hostfile is not None and not expressions else "--hosts"
        raise ForensicsError(f"{where}: {err}") from err


def read_hostfile(path: Path) -> list[str]:
    """Hosts of a host file (see hostfile_lines), at most hostset.MAX_HOSTS in all."""
    for number, text in hostfile_lines(path):
        try:
            hostset.count_hosts(text)  # a bad range names its line
        except hostset.HostSetError as err:
            raise ForensicsError(f"{path}:{number}: --hosts: {err}") from err
    return gather([], path)


def unique(hosts: list[str]) -> list[str]:
    """Hosts in first-seen order without duplicates (a host collected twice would clash in the bundle)."""
    return list(dict.fromkeys(hosts))


def fold(hosts: list[str]) -> str:
    """The compact NodeSet form of a host list, for messages ('node[1-3,7]')."""
    return hostset.fold(hosts)
