"""No code outside the model reads an ErrorEvent's `data` by string key (issue 43, item 3).

Why: an event's data was a dict that readers filled and judges read by key (`e.data.get("exitcode")`); a key
misspelt on either side, or a string where a judge does arithmetic (hostile JSON), failed silently or at run time.
The kinds a judge reads now carry a frozen dataclass (parsers/model/events.py, TYPED_DATA), read by attribute.
The scan finds `X.data.get("k")`, `X.data["k"]`, `(X.data or {}).get("k")` and the same through a local name
bound to `X.data` (`data = e.data or {}`, `getattr(e, "data", None)`); the first test checks it finds each on a
source built here, so the last can fail. STILL_READ lists reads not yet typed, by file and function (none
today): it may only shrink (a read that is gone must leave it, one that comes back fails).

Every kind carries typed data now (the last 33 kinds' dicts are gone): the second scan fails where code outside the
model gives an event's data as a dict (`data={...}`, `data=dict(...)`, `e.data = {...}`), and
tests/parsers/model/test_error_kinds.py checks that each kind has a frozen dataclass and no event keeps a dict.
"""

from __future__ import annotations

import ast
from collections import Counter

from hf_testpaths import REPO

#: files whose `.data` is no ErrorEvent's (a helper's reply): not scanned
NOT_EVENTS = {"forensics/collectors/native_stack.py"}  # `reply.data`: the libdw helper's JSON answer

#: reads by key not yet typed: 'file function' -> how many (their kinds carry a dict still)
STILL_READ: Counter = Counter()


def _is_data(node: ast.expr, bound: set[str]) -> bool:
    """Whether an expression is an event's data: `X.data`, `X.data or {}`, `getattr(X, "data", ...)`, or a name
    bound to one of these."""
    if isinstance(node, ast.BoolOp) and isinstance(node.op, ast.Or):
        return _is_data(node.values[0], bound)
    if isinstance(node, ast.Attribute):
        return node.attr == "data"
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "getattr":
        return len(node.args) >= 2 and isinstance(node.args[1], ast.Constant) and node.args[1].value == "data"
    return isinstance(node, ast.Name) and node.id in bound


def _bound_names(fn: ast.AST) -> set[str]:
    """Names a function binds to an event's data (`data = e.data or {}`, `o, data = e.origin, e.data`)."""
    out: set[str] = set()
    for node in ast.walk(fn):
        if not isinstance(node, ast.Assign):
            continue
        for target in node.targets:
            pairs = (zip(target.elts, node.value.elts) if isinstance(target, ast.Tuple)
                     and isinstance(node.value, ast.Tuple) else [(target, node.value)])
            out |= {t.id for t, v in pairs if isinstance(t, ast.Name) and _is_data(v, set())}
    return out


def _keyed(node: ast.AST, bound: set[str]) -> bool:
    """Whether a node reads event data by a string key."""
    if isinstance(node, ast.Subscript):
        key = node.slice
        return _is_data(node.value, bound) and isinstance(key, ast.Constant) and isinstance(key.value, str)
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "get":
        return _is_data(node.func.value, bound) and bool(node.args) and isinstance(node.args[0], ast.Constant)
    return False


def keyed_reads(source: str, where: str) -> Counter:
    """'where function' -> how many string-key reads of event data the function makes."""
    out: Counter = Counter()
    for fn in ast.walk(ast.parse(source)):
        if isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)):
            bound = _bound_names(fn)
            nested = [f for f in ast.walk(fn) if f is not fn and isinstance(f, (ast.FunctionDef, ast.AsyncFunctionDef))]
            inner = {id(n) for f in nested for n in ast.walk(f)}  # a nested function counts as its own
            n = sum(1 for node in ast.walk(fn) if id(node) not in inner and _keyed(node, bound))
            if n:
                out[f"{where} {fn.name}"] += n
    return out


def test_the_scan_finds_every_way_of_reading_data_by_key():
    source = (
        "def a(e):\n    return e.data.get('x')\n"
        "def b(e):\n    return e.data['x']\n"
        "def c(e):\n    return (e.data or {}).get('x')\n"
        "def d(e):\n    data = e.data or {}\n    return data['x'], data.get('y')\n"
        "def f(e):\n    o, data = e.origin, e.data\n    return data.get('x')\n"
        "def g(e):\n    data = getattr(e, 'data', None) or {}\n    return data.get('x')\n"
        "def ok(e, data):\n    return e.data.exitcode, data.get('x'), e.other.get('x')\n"
    )
    assert keyed_reads(source, "m.py") == Counter({"m.py a": 1, "m.py b": 1, "m.py c": 1, "m.py d": 2, "m.py f": 1,
                                                   "m.py g": 1})


def test_no_code_outside_the_model_reads_event_data_by_key():
    found: Counter = Counter()
    for top in ("parsers", "forensics"):
        for path in sorted((REPO / top).rglob("*.py")):
            rel = path.relative_to(REPO).as_posix()
            if rel.startswith("parsers/model/") or rel in NOT_EVENTS:
                continue  # the model's own encode/decode reads its dicts
            found += keyed_reads(path.read_text(encoding="utf-8"), rel)
    assert found - STILL_READ == Counter()  # a read by key came back (or a new one): type the kind's data
    assert STILL_READ - found == Counter()  # a listed read is gone: take it off STILL_READ


def _a_dict(node: ast.expr | None) -> bool:
    """Whether an expression builds a dict: a literal, a comprehension, or a call of dict()."""
    return isinstance(node, (ast.Dict, ast.DictComp)) or (
        isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "dict")


def dict_data(source: str, where: str) -> list[str]:
    """'where line' of each place that gives an event's data as a dict: a `data=` keyword of a call, or an
    assignment to `X.data`."""
    out = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Call):
            out += [f"{where} {node.lineno}" for k in node.keywords if k.arg == "data" and _a_dict(k.value)]
        elif isinstance(node, ast.Assign) and _a_dict(node.value):
            out += [f"{where} {node.lineno}" for t in node.targets if isinstance(t, ast.Attribute) and t.attr == "data"]
    return out


def test_the_dict_scan_finds_each_way_of_giving_a_dict():
    source = ("ErrorEvent('xid', 'm', o, data={'xid': 79})\nerr('x', data={k: v for k, v in d})\n"
              "e.data = dict(a=1)\nErrorEvent('xid', 'm', o, data=DeviceFault(xid=79))\ndata = {'a': 1}\n")
    assert sorted(dict_data(source, "m.py")) == ["m.py 1", "m.py 2", "m.py 3"]


def test_no_code_outside_the_model_gives_event_data_as_a_dict():
    found = []
    for top in ("parsers", "forensics"):
        for path in sorted((REPO / top).rglob("*.py")):
            rel = path.relative_to(REPO).as_posix()
            if rel.startswith("parsers/model/") or rel in NOT_EVENTS:
                continue
            found += dict_data(path.read_text(encoding="utf-8"), rel)
    assert found == []  # build the kind's typed data (parsers/model/events.py, TYPED_DATA) instead
