"""Host sets: NodeSet syntax (`node[001-512]`), host files, and host-name validation.

Every host name ends up as an argument of ssh, scp or srun, so names are checked
against a strict pattern first: a name that starts with '-' would be read as an
option, and one with spaces or shell characters has no business in a host list.
"""

from __future__ import annotations

import re
from pathlib import Path

from ClusterShell.NodeSet import NodeSet, NodeSetParseError

from forensics.errors import ForensicsError

# RFC 1123 labels, dotted, plus IPv4 literals; no leading '-', no user@, no spaces.
_HOST = re.compile(r"^[A-Za-z0-9](?:[A-Za-z0-9_-]{0,62})(?:\.[A-Za-z0-9_-]{1,63})*$")


def validate_host(name: str) -> str:
    """Return `name` if it is a plain host name or IPv4 address; raise ForensicsError otherwise."""
    if not isinstance(name, str) or len(name) > 253 or not _HOST.match(name):
        raise ForensicsError(f"not a valid host name: {name!r} (letters, digits, '.', '-', '_' only; no leading '-')")
    return name


def expand_nodeset(text: str) -> list[str]:
    """Expand NodeSet syntax ('node[001-004],gpu[1-2]') into validated host names, in order."""
    try:
        nodes = list(NodeSet(text))
    except (NodeSetParseError, ValueError) as err:
        raise ForensicsError(f"--hosts {text!r}: {err}") from err
    return [validate_host(n) for n in nodes]


def read_hostfile(path: Path) -> list[str]:
    """Hosts from a file: one per line or NodeSet syntax; '#' comments and MPI 'slots=' suffixes ignored."""
    try:
        text = Path(path).read_text()
    except OSError as err:
        raise ForensicsError(f"--hostfile {path}: {err.strerror or err}") from err
    hosts: list[str] = []
    for number, raw in enumerate(text.splitlines(), 1):
        line = raw.split("#", 1)[0].strip()
        if not line:
            continue
        first = line.split()[0]  # "node01 slots=8" (Open MPI / DeepSpeed hostfiles)
        try:
            hosts.extend(expand_nodeset(first))
        except ForensicsError as err:
            raise ForensicsError(f"{path}:{number}: {err}") from err
    return hosts


def unique(hosts: list[str]) -> list[str]:
    """Hosts in first-seen order without duplicates (a host collected twice would clash in the bundle)."""
    return list(dict.fromkeys(hosts))


def fold(hosts: list[str]) -> str:
    """The compact NodeSet form of a host list, for messages ('node[1-3,7]')."""
    return str(NodeSet.fromlist(hosts)) if hosts else ""
