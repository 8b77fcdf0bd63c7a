"""The one host-set expander: `node[001-512],gpu7` into checked host names.

Host lists come from the command line, host files and Slurm, and every name ends up
as an argument of ssh, scp or srun, so they are hostile input. ClusterShell's NodeSet
resolves `@group` names by running the upcalls of its `groups.conf` through a shell,
and the pip package ships such a file: `@a';touch${IFS}/tmp/pwned;'` ran a command.
So, in this order, before any expansion:

1. the text must use only letters, digits and `. _ - , [ ]` (no `@`, no spaces, no
   shell or NodeSet operator characters), and be at most MAX_TEXT characters;
2. the number of names it would expand to is counted from the brackets, and text
   that names more than MAX_HOSTS hosts is refused (ClusterShell took 184 s to
   build `n[1-100000000]`); the cap is on the total of ALL expressions one command
   is given (expand_all): forty host-file lines of `n[1-100000]` each are refused
   before any of them is expanded;
3. only then NodeSet expands it, with the group resolver switched off;
4. every resulting name must be a plain host name (see validate_host).
"""

from __future__ import annotations

import re
from typing import Sequence

from ClusterShell.NodeSet import RESOLVER_NOGROUP, NodeSet
from parsers.input.errors import UsageError

MAX_TEXT = 65536  #: characters of one host-set expression
MAX_HOSTS = 100_000  #: hosts one command may name, all expressions and host-file lines together
MAX_NAME = 253  #: a DNS name's limit

_SYNTAX = re.compile(r"^[A-Za-z0-9._,\[\]-]+$")
# RFC 1123 labels, dotted, plus IPv4 literals; '_' tolerated (seen in lab host names).
_HOST = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_-]{0,62}(?:\.[A-Za-z0-9_-]{1,63})*$")
_BRACKET = re.compile(r"\[([^\[\]]*)\]")
_RANGE = re.compile(r"^(\d{1,12})(?:-(\d{1,12}))?$")


class HostSetError(UsageError):
    """A host name or host-set expression that is refused; the message says why."""


def validate_host(name: object) -> str:
    """Return `name` if it is a plain host name or IPv4 address; raise HostSetError otherwise.

    A leading '-' would be read as an option by ssh/srun; '@', spaces, quotes and
    shell characters have no business in a host name.
    """
    if not isinstance(name, str) or len(name) > MAX_NAME or not _HOST.match(name):
        raise HostSetError(f"not a valid host name: {name!r} (letters, digits, '.', '-', '_' only; no leading '-')")
    return name


def _split_top(text: str) -> list[str]:
    """Split at commas outside brackets ('a[1,2],b' -> ['a[1,2]', 'b'])."""
    parts, depth, start = [], 0, 0
    for i, ch in enumerate(text):
        if ch == "[":
            depth += 1
            if depth > 1:
                raise HostSetError(f"nested brackets in host set {text!r}")
        elif ch == "]":
            depth -= 1
            if depth < 0:
                raise HostSetError(f"unbalanced ']' in host set {text!r}")
        elif ch == "," and depth == 0:
            parts.append(text[start:i])
            start = i + 1
    if depth:
        raise HostSetError(f"unbalanced '[' in host set {text!r}")
    parts.append(text[start:])
    return parts


def _bracket_count(inner: str, text: str) -> int:
    """How many numbers `001-003,7` names; refuses anything but ranges of digits."""
    total = 0
    for piece in inner.split(","):
        m = _RANGE.match(piece)
        if not m:
            raise HostSetError(f"bad range {piece!r} in host set {text!r} (use [1-4,7])")
        lo = int(m.group(1))
        hi = int(m.group(2)) if m.group(2) is not None else lo
        if hi < lo:
            raise HostSetError(f"range {piece!r} runs backwards in host set {text!r}")
        total += hi - lo + 1
        if total > MAX_HOSTS:
            break
    return total


def count_hosts(text: str) -> int:
    """Upper bound of the names `text` expands to, computed without expanding it."""
    total = 0
    for part in _split_top(text):
        if not part:
            continue
        names = 1
        for inner in _BRACKET.findall(part):
            names *= _bracket_count(inner, text)
            if names > MAX_HOSTS:
                return names
        total += names
        if total > MAX_HOSTS:
            return total
    return total


def check_syntax(text: object) -> str:
    """Refuse host-set text that could reach a group resolver, a shell or an option parser."""
    if not isinstance(text, str) or not text.strip():
        raise HostSetError("empty host set")
    if len(text) > MAX_TEXT:
        raise HostSetError(f"host set of {len(text)} characters is too long (at most {MAX_TEXT})")
    if not _SYNTAX.match(text):
        bad = sorted({ch for ch in text if not _SYNTAX.match(ch)})
        raise HostSetError(
            f"host set {text!r}: character(s) {''.join(bad)!r} not allowed "
            "(letters, digits, '.', '-', '_', ',' and [ranges] only; @groups are not supported)")
    return text


def _expand_checked(checked: str) -> list[str]:
    """NodeSet expansion of text already syntax- and size-checked, group resolver off."""
    try:
        nodes = list(NodeSet(checked, resolver=RESOLVER_NOGROUP))
    except Exception as err:  # noqa: BLE001 - ClusterShell raises several parse error types
        raise HostSetError(f"cannot parse host set {checked!r}: {err}") from err
    return [validate_host(n) for n in nodes]


def expand(text: object) -> list[str]:
    """Expand one host-set expression into validated host names (NodeSet order, no duplicates)."""
    return expand_all([text])


def expand_all(texts: Sequence[object], limit: int = MAX_HOSTS) -> list[str]:
    """Expand several expressions (--hosts values, host-file lines) under ONE host cap.

    Every text is syntax-checked and counted before the first one is expanded, so the
    total, not each expression, is what the cap bounds.
    """
    checked = [check_syntax(t) for t in texts]
    total = 0
    for text in checked:
        total += count_hosts(text)
        if total > limit:
            what = f"host set {checked[0][:80]!r} names" if len(checked) == 1 else f"{len(checked)} host lists name"
            raise HostSetError(f"{what} more than {limit} hosts in all (at most {limit})")
    out: list[str] = []
    for text in checked:
        out += _expand_checked(text)
    return out


def fold(hosts: list[str]) -> str:
    """The compact form of validated host names ('node[1-3,7]'), for messages and srun."""
    if not hosts:
        return ""
    return str(NodeSet.fromlist([validate_host(h) for h in hosts], resolver=RESOLVER_NOGROUP))
