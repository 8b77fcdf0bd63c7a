"""Merge host digests up a tree: what 100,000 ranks look like, in a size that grows with their variety.

Why: as STAT merges stack traces at each level of its tree, a gateway (or the fleet's merge) can fold
its hosts' digests into one: ranks with the same stack class and top frames become one equivalence
class (what the main thread does: in which collective, GPU wait, or where else; the top frames of its
first member kept as an example) with its rank set as ranges ('0-4095,4097-8191'); each communicator's positions (last op and seq)
become a histogram whose every bar keeps its rank set (the majority as a few ranges, the odd ones out
named); recorder wait edges, exceptions, exits, frozen states and host findings are kept as they are,
capped. For judging over classes (`parsers.digest_classes`) it also keeps each rank's own oddities as
rank sets per flag (`flags`), the recorder's communicator members as runs of comm rank -> job rank
(`members`), who waits on whom as waiter rank sets per (communicator, peer) (`waits`), the ranks that
have recorder state (`recorder_ranks`), and the processes of unknown rank by (host, pid) (`unranked`). Merging is associative and commutative (`merge(merge(a, b), c) == merge(a, merge(b, c))`), so
any tree shape gives the same root.

Input: the `ranks` summaries and `host_findings` of host digests (`parsers.digest.rank_summary`), through
`from_host`; output: a merged digest document (`FORMAT`, `VERSION`), itself input to `merge`.
"""

from __future__ import annotations

from typing import Any, Iterable, Iterator

from parsers.digest import FLAGS

FORMAT = "hang-forensics-merged-digest"
VERSION = 2  #: 2: flags, members, waits, recorder_ranks, unranked (judging over classes)
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


def difference(a: Intervals, b: Intervals) -> Intervals:
    """Ranks in `a` and not in `b` (both sorted, disjoint)."""
    out: Intervals = []
    j = 0
    for lo, hi in a:
        cur = lo
        while j < len(b) and b[j][1] < cur:
            j += 1
        k = j
        while k < len(b) and b[k][0] <= hi:
            if b[k][0] > cur:
                out.append([cur, b[k][0] - 1])
            cur = max(cur, b[k][1] + 1)
            k += 1
        if cur <= hi:
            out.append([cur, hi])
    return out


def ranks_of(iv: Intervals) -> Iterator[int]:
    """Each rank of a rank set, in order."""
    for lo, hi in iv:
        yield from range(lo, hi + 1)


def meets(a: Intervals, b: Intervals) -> bool:
    """Whether two rank sets share a rank (both sorted, disjoint)."""
    i = j = 0
    while i < len(a) and j < len(b):
        if a[i][1] < b[j][0]:
            i += 1
        elif b[j][1] < a[i][0]:
            j += 1
        else:
            return True
    return False


def holds(rank: int | None, ranges: Intervals) -> bool:
    """Whether a rank is in a rank set."""
    return rank is not None and any(lo <= rank <= hi for lo, hi in ranges)


def summarised(merged: dict[str, Any]) -> Intervals:
    """Every rank a host's digest summarised (each rank has exactly one state, so the states cover them all)."""
    held: Intervals = []
    for iv in merged["states"].values():
        held = union(held, iv)
    return held


def _ranks(ranks: Iterable[int]) -> Intervals:
    out: Intervals = []
    for r in ranks:
        out = union(out, [[r, r]])
    return out


def empty() -> dict[str, Any]:
    return {"format": FORMAT, "version": VERSION, "hosts": 0, "ranks": 0, "stacks": {}, "comms": {}, "states": {},
            "edges": [], "exceptions": [], "exits": [], "host_findings": [], "dropped": 0,
            "flags": {}, "members": {}, "waits": {}, "recorder_ranks": [], "unranked": []}


_LISTS = ("edges", "exceptions", "exits", "host_findings", "unranked")


def _int(v: Any) -> bool:
    return isinstance(v, int) and not isinstance(v, bool) and 0 <= v < 1 << 31


def from_host(doc: dict[str, Any]) -> dict[str, Any]:
    """One host digest (parsers.digest.make_digest's document) as a merged digest of one host."""
    out = empty()
    out["hosts"] = 1
    host = doc.get("host") if isinstance(doc.get("host"), str) else None
    for r in doc.get("ranks") or []:
        rank = r.get("rank") if isinstance(r, dict) else None
        if isinstance(r, dict) and rank is None and _int(r.get("pid")):  # a process whose rank is not known
            out["unranked"].append({"host": host, "pid": r["pid"]})
            continue
        if not _int(rank):
            out["dropped"] += 1
            continue
        flags, roles = r.get("flags"), (r.get("recorder"), r.get("waits_on"))
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
        for flag in (flags if isinstance(flags, list) else [])[:8]:
            if isinstance(flag, str):  # a flag this tool does not know is still an oddity, kept under one name
                name = flag if flag in FLAGS else "other"
                out["flags"][name] = union(out["flags"].get(name, []), one)
        _add_roles(out, rank, *roles)
    out["host_findings"] = [{"rank": f.get("rank"), "host": host, "reason_class": str(f.get("reason_class"))[:60],
                             "reason": str(f.get("reason"))[:500]} for f in doc.get("host_findings") or []
                            if isinstance(f, dict)][:MAX_ITEMS]
    _cap(out)
    return out


def _add_roles(out: dict, rank: int, members: Any, waits_on: Any) -> None:
    """The rank's recorder communicators and whom it waits on, into `members`, `waits` and `recorder_ranks`."""
    if isinstance(members, list) and members:
        out["recorder_ranks"] = union(out["recorder_ranks"], [[rank, rank]])
        for m in members[:32]:
            if isinstance(m, list) and len(m) == 3 and isinstance(m[0], str) and _int(m[1]) and _int(m[2]):
                _add_member(out, m[0][:40], m[1], m[2])
    for w in (waits_on if isinstance(waits_on, list) else [])[:64]:
        if isinstance(w, list) and len(w) == 2 and isinstance(w[0], str) and _int(w[1]):
            comm = out["waits"].get(w[0][:40])
            if comm is None:
                if len(out["waits"]) >= MAX_COMMS:
                    out["dropped"] += 1
                    continue
                comm = out["waits"][w[0][:40]] = {}
            peer = str(w[1])
            if peer not in comm and len(comm) >= MAX_POSITIONS:
                out["dropped"] += 1
                continue
            comm[peer] = union(comm.get(peer, []), [[rank, rank]])


def _add_member(out: dict, comm: str, comm_rank: int, job_rank: int, length: int = 1) -> None:
    """Comm ranks comm_rank.. (length of them) are job ranks job_rank..: kept as runs [lo, hi, job_lo]."""
    runs = out["members"].get(comm)
    if runs is None:
        if len(out["members"]) >= MAX_COMMS:
            out["dropped"] += length
            return
        runs = out["members"][comm] = []
    runs.append([comm_rank, comm_rank + length - 1, job_rank])


def _join_runs(runs: list[list[int]]) -> list[list[int]]:
    """Runs sorted and joined where one continues the other (comm ranks and job ranks both consecutive)."""
    out: list[list[int]] = []
    for lo, hi, job in sorted(runs):
        if out and lo == out[-1][1] + 1 and job == out[-1][2] + (lo - out[-1][0]):
            out[-1][1] = hi
        elif not out or lo > out[-1][1]:
            out.append([lo, hi, job])
    return out[:MAX_RANGES]


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
        for name in _LISTS:
            out[name] += part.get(name, [])
        for flag, iv in part.get("flags", {}).items():
            out["flags"][flag] = union(out["flags"].get(flag, []), iv)
        out["recorder_ranks"] = union(out["recorder_ranks"], part.get("recorder_ranks", []))
        for comm, runs in sorted(part.get("members", {}).items()):
            for lo, hi, job in runs:
                _add_member(out, comm, lo, job, hi - lo + 1)
        for comm, peers in sorted(part.get("waits", {}).items()):
            for peer, iv in sorted(peers.items()):
                if comm not in out["waits"] and len(out["waits"]) >= MAX_COMMS \
                        or peer not in out["waits"].get(comm, {}) and len(out["waits"].get(comm, {})) >= MAX_POSITIONS:
                    out["dropped"] += count(iv)
                    continue
                at = out["waits"].setdefault(comm, {})
                at[peer] = union(at.get(peer, []), iv)
    for name in _LISTS:
        out[name].sort(key=lambda x: (x.get("rank") is None, x.get("rank") or 0, str(x)))
    _cap(out)
    return out


def merge_all(docs: Iterable[dict[str, Any]]) -> dict[str, Any]:
    """All of `docs` as one, merged as a balanced tree (a binary counter: memory for log2(n) partial
    merges, and each part takes part in log2(n) merges, not n as in a left fold of a growing result)."""
    stack: list[tuple[int, dict[str, Any]]] = []
    for doc in docs:
        level, cur = 0, doc
        while stack and stack[-1][0] == level:
            cur = merge(stack.pop()[1], cur)
            level += 1
        stack.append((level, cur))
    out = empty()
    while stack:
        out = merge(stack.pop()[1], out)
    return out


def _cap(out: dict) -> None:
    for comm in out["members"]:
        out["members"][comm] = _join_runs(out["members"][comm])
    for name in _LISTS:
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


#: a merged digest larger than this is refused unread (its size follows the job's variety: kB to a few MB)
MAX_MERGED_BYTES = 64 << 20


def _intervals_ok(iv: Any) -> bool:
    return isinstance(iv, list) and len(iv) <= MAX_RANGES and all(
        isinstance(p, list) and len(p) == 2 and _int(p[0]) and _int(p[1]) and p[0] <= p[1] for p in iv)


def check_merged(doc: Any) -> dict[str, Any]:
    """A merged digest from elsewhere (a gateway's answer: hostile like any input) checked field by field
    against the shape `merge` writes; ValueError with the reason. Only checked documents are merged."""
    if not isinstance(doc, dict) or doc.get("format") != FORMAT:
        raise ValueError(f"not a {FORMAT} document")
    if doc.get("version") != VERSION:
        raise ValueError(f"merged digest version {doc.get('version')!r}, this tool reads {VERSION}")
    for key in ("hosts", "ranks", "dropped"):
        if not _int(doc.get(key)):
            raise ValueError(f"{key!r}: not a count")
    shapes = {"stacks": dict, "comms": dict, "states": dict, "flags": dict, "members": dict, "waits": dict,
              "recorder_ranks": list, **{k: list for k in _LISTS}}
    for key, typ in shapes.items():
        if not isinstance(doc.get(key), typ):
            raise ValueError(f"{key!r}: missing or not a {typ.__name__}")
    if len(doc["stacks"]) > MAX_CLASSES or len(doc["comms"]) > MAX_COMMS or len(doc["waits"]) > MAX_COMMS \
            or len(doc["members"]) > MAX_COMMS or len(doc["states"]) > MAX_CLASSES or len(doc["flags"]) > len(FLAGS) + 1:
        raise ValueError("more classes or communicators than a merged digest keeps")
    for cls in doc["stacks"].values():
        if not isinstance(cls, dict) or not _intervals_ok(cls.get("ranks")) \
                or any(not isinstance(cls.get(k), (str, type(None))) for k in ("kind", "op", "where")):
            raise ValueError("a stack class of another shape")
        if not isinstance(cls.get("top", []), list) or any(not isinstance(x, (str, type(None))) for x in cls.get("top", [])):
            raise ValueError("a stack class's top frames of another shape")
    sets = [*doc["states"].values(), *doc["flags"].values(), doc["recorder_ranks"]]
    for group in (doc["comms"], doc["waits"]):
        for hist in group.values():
            if not isinstance(hist, dict) or len(hist) > MAX_POSITIONS:
                raise ValueError("a histogram of another shape")
            sets += hist.values()
    if not all(_intervals_ok(iv) for iv in sets):
        raise ValueError("a rank set that is not sorted [lo, hi] pairs")
    for runs in doc["members"].values():
        if not isinstance(runs, list) or any(not (isinstance(r, list) and len(r) == 3 and all(_int(x) for x in r)
                                                  and r[0] <= r[1]) for r in runs):
            raise ValueError("communicator members of another shape")
    for key in _LISTS:
        if len(doc[key]) > MAX_ITEMS or any(not isinstance(x, dict) for x in doc[key]):
            raise ValueError(f"{key!r}: more items than kept, or not records")
    if any(not _int(p.get("pid")) or not isinstance(p.get("host"), (str, type(None))) for p in doc["unranked"]):
        raise ValueError("an unranked process without its host and pid")
    return doc
