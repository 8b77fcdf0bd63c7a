"""Types and ranges of manifest.json, checked before anything is built from it.

A manifest is data from another machine (or an attacker): `world_size` of 10^12 once
made a loop over ranks die with MemoryError, a string where a list belongs made
`for f in files` walk characters. `check_manifest(data)` checks every field of every
record against this schema and raises ValueError naming the first bad place, so
code after it may trust types and bounds. Pure, and ground floor (nothing above parsers/)
(the bundle reader can move here without dragging the writer along).
"""

from __future__ import annotations

import math
from typing import Any
from parsers.input.errors import ManifestError

MAX_WORLD = 1 << 22  #: ranks in one job (the largest jobs run about 10^5)
MAX_PID = (1 << 31) - 1
MAX_RECORDS = 1 << 22  #: hosts, ranks, missing ranks, artifacts, notes
MAX_COLLECTORS = 256  #: collector records per rank or host
MAX_FILES = 100_000  #: files one collector names
MAX_STRING = 1 << 20  #: characters of any one string
MAX_ARGV = 4096  #: elements of a command line

# field -> (kind, required). kinds: str, int:<lo>:<hi>, num, bool, strs, dict, records:<schema>
_COLLECTOR = {"name": ("str", True), "status": ("str", True), "seconds": ("num", False), "error": ("str?", False),
              "files": ("strs", False), "details": ("dict", False)}
_HOST = {"host": ("str", True), "status": ("str", False), "seconds": ("num", False), "error": ("str?", False),
         "dir": ("str?", False), "collectors": ("collectors", False), "costs": ("dict", False)}
_RANK = {"host": ("str", True), "pid": (f"int:0:{MAX_PID}", True), "dir": ("str", True),
         "rank": (f"int?:0:{MAX_WORLD - 1}", False), "local_rank": (f"int?:0:{MAX_WORLD - 1}", False),
         "world_size": (f"int?:1:{MAX_WORLD}", False), "local_world_size": (f"int?:1:{MAX_WORLD}", False),
         "group_rank": (f"int?:0:{MAX_WORLD - 1}", False), "job_id": ("str?", False), "cmdline": ("argv", False),
         "state_before": ("str?", False), "state_after": ("str?", False), "collectors": ("collectors", False)}
_MISSING = {"rank": (f"int:0:{MAX_WORLD - 1}", True), "reason": ("str", True), "host": ("str?", False),
            "job_id": ("str?", False)}
_ARTIFACT = {"kind": ("str", True), "path": ("str", True), "host": ("str?", False),
             "rank": (f"int?:0:{MAX_WORLD - 1}", False)}
_TOP = {"format": ("str", True), "version": ("int:1:1000000", True), "created": ("str", True),
        "tool_version": ("str", True), "command": ("argv", False), "hosts": ("hosts", False),
        "ranks": ("ranks", False), "missing": ("missings", False), "artifacts": ("artifacts", False),
        "notes": ("notes", False), "interrupted": ("bool", False)}
_LISTS = {"collectors": (_COLLECTOR, MAX_COLLECTORS), "hosts": (_HOST, MAX_RECORDS), "ranks": (_RANK, MAX_RECORDS),
          "missings": (_MISSING, MAX_RECORDS), "artifacts": (_ARTIFACT, MAX_RECORDS)}


def _place(where: Any) -> str:
    """'manifest.ranks[3].collectors[0].files' from the (parent, step) chain built while checking.

    Why a chain: a 100k-rank manifest has millions of fields; formatting each one's place
    up front cost seconds, and a place is only ever shown for the one that fails.
    """
    steps = []
    while isinstance(where, tuple):
        where, step = where
        steps.append(f"[{step}]" if isinstance(step, int) else f".{step}")
    return str(where) + "".join(reversed(steps))


def _fail(where: Any, what: str) -> None:
    raise ManifestError(f"{_place(where)}: {what}")


def _check_str(value: Any, where: Any, optional: bool) -> None:
    if value is None and optional:
        return
    if not isinstance(value, str):
        _fail(where, f"expected a string, got {type(value).__name__}")
    if len(value) > MAX_STRING:
        _fail(where, f"string of {len(value)} characters (at most {MAX_STRING})")


_INT_SPECS: dict[str, tuple[bool, int, int]] = {}


def _int_spec(spec: str) -> tuple[bool, int, int]:
    """'int?:0:4194304' -> (optional, 0, 4194304), parsed once per spec."""
    got = _INT_SPECS.get(spec)
    if got is None:
        kind, lo, hi = spec.split(":")
        got = _INT_SPECS[spec] = (kind.endswith("?"), int(lo), int(hi))
    return got


def _check_int(value: Any, where: Any, spec: str) -> None:
    optional, lo, hi = _int_spec(spec)
    if value is None and optional:
        return
    if isinstance(value, bool) or not isinstance(value, int):
        _fail(where, f"expected an integer, got {type(value).__name__}")
    if not lo <= value <= hi:
        _fail(where, f"{value if abs(value) < 10**12 else 'a huge number'} is out of range {lo}..{hi}")


def _check_list(value: Any, where: Any, limit: int) -> list:
    if not isinstance(value, list):
        _fail(where, f"expected a list, got {type(value).__name__}")
    if len(value) > limit:
        _fail(where, f"{len(value)} entries (at most {limit})")
    return value


def _check_value(value: Any, where: Any, kind: str) -> None:
    """Check one field value against its kind."""
    if kind in ("str", "str?"):
        _check_str(value, where, kind == "str?")
    elif kind.startswith("int"):
        _check_int(value, where, kind)
    elif kind == "num":
        # an int past a float's range (10**400) makes isfinite raise OverflowError: bounded first
        if (isinstance(value, bool) or not isinstance(value, (int, float)) or abs(value) > 1e300
                or not math.isfinite(value)):
            _fail(where, "expected a finite number")
    elif kind == "bool":
        if not isinstance(value, bool):
            _fail(where, "expected true or false")
    elif kind == "dict":
        if not isinstance(value, dict):
            _fail(where, f"expected an object, got {type(value).__name__}")
    elif kind in ("strs", "argv", "notes"):
        limit = {"strs": MAX_FILES, "argv": MAX_ARGV, "notes": MAX_RECORDS}[kind]
        for i, item in enumerate(_check_list(value, where, limit)):
            _check_str(item, (where, i), False)
    elif kind in _LISTS:
        schema, limit = _LISTS[kind]
        for i, item in enumerate(_check_list(value, where, limit)):
            check_record(item, schema, (where, i))
    else:  # pragma: no cover - a schema typo
        raise AssertionError(kind)


_STR_KINDS = frozenset(("str", "str?"))


def check_record(data: Any, schema: dict[str, tuple[str, bool]], where: Any) -> None:
    """Check one object: it is a dict, required fields are there, every known field has its type and range."""
    if not isinstance(data, dict):
        _fail(where, f"expected an object, got {type(data).__name__}")
    absent = [name for name, (_, required) in schema.items() if required and name not in data]
    if absent:
        _fail(where, f"missing field(s) {', '.join(absent)}")
    for name, (kind, _) in schema.items():
        if name in data:
            value = data[name]
            if type(value) is str and kind in _STR_KINDS and len(value) <= MAX_STRING:
                continue  # the common case, decided here: a manifest of 100,000 ranks has a million fields
            _check_value(value, (where, name), kind)


def check_manifest(data: Any) -> None:
    """Raise ValueError naming the first field of parsed manifest JSON whose type or range is wrong.

    Unknown keys are ignored (a newer writer may add some); `format`/`version`
    acceptance is the caller's (it knows which versions it reads).
    """
    check_record(data, _TOP, "manifest")
