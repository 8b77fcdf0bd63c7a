"""Merge host digests up a tree: what 100,000 ranks look like, in a size that grows with their variety.

Why: as STAT merges stack traces at each level of its tree, a gateway (or the fleet's merge) can fold
its hosts' digests into one: ranks with the same stack class and top frames become one equivalence
class (what the main thread does: in which collective, GPU wait, or where else; the top frames of its
first member kept as an example) with its rank set as ranges ('0-4095,4097-8191'); each communicator's positions (last op and seq)
become a histogram whose every bar keeps its rank set (the majority as a few ranges, the odd ones out
named); recorder wait edges, exceptions, exits, frozen states and host findings are kept as they are,
capped. Merging is associative and commutative (`merge(merge(a, b), c) == merge(a, merge(b, c))`), so
any tree shape gives the same root.

Input: the `ranks` summaries and `host_findings` of host digests (`parsers.digest.rank_summary`), through
`from_host`; output: a merged digest document (`FORMAT`, `VERSION`), itself input to `merge`.
"""

from __future__ import annotations

from typing import Any, Iterable

FORMAT = "hang-forensics-merged-digest"
VERSION = 1
#: most distinct stack classes, positions per communicator, communicators kept; the rest is counted
MAX_CLASSES, MAX_POSITIONS, MAX_COMMS = 256, 64, 256
#: most edges, exceptions, exits, host findings and ranges of one rank set kept
MAX_ITEMS, MAX_RANGES = 1024, 4096

Intervals = list[list[int]]  #: sorted, disjoint, inclusive [lo, hi] pairs


def union(a: Intervals, b: Intervals) -> Intervals:
    """Two rank sets as intervals, joined (adjacent intervals merge); capped at MAX_RANGES intervals."""
    out: Intervals = []
    for lo, hi in sorted([*a, *b]):
        if out and lo <= out[-1][1] + 1:
            out[-1][1] = max(out[-1][1], hi)
        else:
            out.append([lo, hi])
    return out[:MAX_RANGES]


def count(iv: Intervals) -> int:
    return sum(hi - lo + 1 for lo, hi in iv)


def fold(iv: Intervals) -> str:
    """'0-4095,4097' for people."""
    return ",".join(str(lo) if lo == hi else f"{lo}-{hi}" for lo, hi in iv)


def _ranks(ranks: Iterable[int]) -> Intervals:
    out: Intervals = []
    for r in ranks:
        out = union(out, [[r, r]])
    return out


def empty() -> dict[str, Any]:
    return {"format": FORMAT, "version": VERSION, "hosts": 0, "ranks": 0, "stacks": {}, "comms": {}, "states": {},
            "edges": [], "exceptions": [], "exits": [], "host_findings": [], "dropped": 0}


def from_host(doc: dict[str, Any]) -> dict[str, Any]:
    """One host digest (parsers.digest.make_digest's document) as a merged digest of one host."""
    out = empty()
    out["hosts"] = 1
    host = doc.get("host") if isinstance(doc.get("host"), str) else None
    for r in doc.get("ranks") or []:
        rank = r.get("rank") if isinstance(r, dict) else None
        if not isinstance(rank, int) or isinstance(rank, bool) or not 0 <= rank < 1 << 31:
            out["dropped"] += 1
            continue
        r = _clean(r)
        out["ranks"] += 1
        one = [[rank, rank]]
        stack = r.get("stack") or {}
        # the stack class the judges use (parsers.stacks.classify): native frames differ by address, rank to rank
        key = "|".join(str(x) for x in (stack.get("kind"), stack.get("op"), stack.get("where")))
        _add_class(out, key, {"kind": stack.get("kind"), "op": stack.get("op"), "where": stack.get("where"),
                              "top": list(r.get("top") or [])[:8]}, one)
        state = str(r.get("state"))
        out["states"][state] = union(out["states"].get(state, []), one)
        for comm, pos in (r.get("comms") or {}).items():
            if isinstance(pos, list) and len(pos) >= 2:
                _add_position(out, comm, f"{str(pos[0])[:60]}@{str(pos[1])[:30]}", one)
        for w in (r.get("recorder_waits") or [])[:16]:
            out["edges"].append({"rank": rank, "host": host, "wait": w})
        if r.get("exception"):
            out["exceptions"].append({"rank": rank, "host": host, "text": r["exception"]})
        for x in r.get("exits") or []:
            out["exits"].append({"rank": rank, "host": host, "exit": x})
    out["host_findings"] = [{"rank": f.get("rank"), "host": host, "reason_class": str(f.get("reason_class"))[:60],
                             "reason": str(f.get("reason"))[:500]} for f in doc.get("host_findings") or []
                            if isinstance(f, dict)][:MAX_ITEMS]
    _cap(out)
    return out


def _clean(r: dict) -> dict:
    """A rank summary from a digest (data from a host: hostile) with each field of the shape used, else dropped."""
    stack = r.get("stack") if isinstance(r.get("stack"), dict) else {}
    text = lambda v: str(v)[:300] if v is not None else None  # noqa: E731 - one-line coercion
    return {"stack": {k: text(stack.get(k)) for k in ("kind", "op", "where")},
            "top": [text(x) for x in r.get("top") or [] if isinstance(x, str)][:8] if isinstance(r.get("top"), list) else [],
            "state": text(r.get("state")),
            "comms": {str(c)[:200]: p for c, p in r["comms"].items()} if isinstance(r.get("comms"), dict) else {},
            "recorder_waits": r["recorder_waits"] if isinstance(r.get("recorder_waits"), list) else [],
            "exception": text(r.get("exception")) if r.get("exception") else None,
            "exits": r["exits"] if isinstance(r.get("exits"), list) else []}


def _add_class(out: dict, key: str, shape: dict, ranks: Intervals) -> None:
    cls = out["stacks"].get(key)
    if cls is None:
        if len(out["stacks"]) >= MAX_CLASSES:
            out["dropped"] += count(ranks)
            return
        cls = out["stacks"][key] = dict(shape, ranks=[])
    cls["ranks"] = union(cls["ranks"], ranks)


def _add_position(out: dict, comm: str, pos: str, ranks: Intervals) -> None:
    hist = out["comms"].get(comm)
    if hist is None:
        if len(out["comms"]) >= MAX_COMMS:
            out["dropped"] += count(ranks)
            return
        hist = out["comms"][comm] = {}
    if pos not in hist and len(hist) >= MAX_POSITIONS:
        out["dropped"] += count(ranks)
        return
    hist[pos] = union(hist.get(pos, []), ranks)


def merge(a: dict[str, Any], b: dict[str, Any]) -> dict[str, Any]:
    """Two merged digests as one (associative, commutative: the tree's shape does not matter)."""
    out = empty()
    for part in (a, b):
        out["hosts"] += part["hosts"]
        out["ranks"] += part["ranks"]
        out["dropped"] += part["dropped"]
        for key, cls in sorted(part["stacks"].items()):
            _add_class(out, key, {k: v for k, v in cls.items() if k != "ranks"}, cls["ranks"])
        for state, iv in part["states"].items():
            out["states"][state] = union(out["states"].get(state, []), iv)
        for comm, hist in sorted(part["comms"].items()):
            for pos, iv in sorted(hist.items()):
                _add_position(out, comm, pos, iv)
        for name in ("edges", "exceptions", "exits", "host_findings"):
            out[name] += part[name]
    for name in ("edges", "exceptions", "exits", "host_findings"):
        out[name].sort(key=lambda x: (x.get("rank") is None, x.get("rank") or 0, str(x)))
    _cap(out)
    return out


def merge_all(docs: Iterable[dict[str, Any]]) -> dict[str, Any]:
    out = empty()
    for doc in docs:
        out = merge(out, doc)
    return out


def _cap(out: dict) -> None:
    for name in ("edges", "exceptions", "exits", "host_findings"):
        if len(out[name]) > MAX_ITEMS:
            out["dropped"] += len(out[name]) - MAX_ITEMS
            del out[name][MAX_ITEMS:]


def outliers(merged: dict[str, Any]) -> dict[str, list[str]]:
    """Per communicator, the positions other than the most common one, with their ranks folded: who is
    not where the others are (what a person, or the raw-file rule, looks at first)."""
    out: dict[str, list[str]] = {}
    for comm, hist in merged["comms"].items():
        if len(hist) <= 1:
            continue
        top = max(hist, key=lambda p: (count(hist[p]), p))
        out[comm] = [f"{pos}: ranks {fold(iv)}" for pos, iv in sorted(hist.items()) if pos != top]
    return out


def stack_classes(merged: dict[str, Any]) -> list[str]:
    """The equivalence classes of main-thread stacks, largest first, with their rank ranges."""
    rows = sorted(merged["stacks"].values(), key=lambda c: -count(c["ranks"]))
    return [f"{count(c['ranks'])} rank(s) {fold(c['ranks'])}: {c['kind']}"
            + (f" in {c['op']}" if c.get("op") else "") + (f" at {c['where']}" if c.get("where") else "") for c in rows]
