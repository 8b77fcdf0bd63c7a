"""logscan (head, tail, what they point at) against the full per-line parse, on real logs.

The claim tested: for what a hang needs (communicator members and identity, errors, the
last operations per communicator) the scanned result equals the full parse, in full mode
always, in head-tail mode for the head, the tail and every communicator the tail uses;
and the folder verdict is the same. Inputs are the real fixtures (tests/fixtures/nccl,
gloo: captured from real runs), and big files made of their real lines repeated.
"""

from __future__ import annotations

import json
import os
from collections import Counter, defaultdict, deque
from pathlib import Path

import pytest

from hf_testpaths import FIXTURES
from parsers.model.events import CommMember, ErrorEvent, OpEvent, TopoEdge
from parsers.readers import logscan, nccl_log, rank_log
from parsers.gather.registry import HEAD_BYTES, recognise

K = 4


def _logs() -> list[tuple[Path, str]]:
    out = []
    for root in (FIXTURES / "nccl", FIXTURES / "gloo"):
        for p in sorted(root.rglob("*")):
            if p.is_file():
                head = p.read_bytes()[:HEAD_BYTES]
                kind = recognise(p.name, head, complete=p.stat().st_size <= HEAD_BYTES).name
                if kind in ("nccl-log", "rank-log"):
                    out.append((p, kind))
    return out


LOGS = _logs()


def _full(path: Path, kind: str):
    reader = nccl_log.parse_lines if kind == "nccl-log" else rank_log.parse_lines
    with open(path, encoding="utf-8", errors="replace", newline="") as fh:
        return reader(fh, str(path))


def _key(ev):
    o = ev.origin
    if isinstance(ev, OpEvent):
        return ("op", ev.comm, ev.comm_rank, ev.op, ev.seq, o.pid, o.host, o.rank, ev.count)
    if isinstance(ev, CommMember):
        return ("member", ev.comm, ev.comm_rank, ev.nranks, o.pid, o.host, ev.comm_ptr, ev.parent)
    if isinstance(ev, ErrorEvent):
        return ("error", ev.kind, ev.message, o.pid, o.host, o.rank)
    if isinstance(ev, TopoEdge):
        return ("topo", ev.comm, ev.src, ev.dst, ev.kind, ev.channel)
    return (type(ev).__name__, repr({k: getattr(ev, k) for k in ev.__slots__ if k != "origin"}))


def _last_ops(parsed, keep=K) -> dict:
    last: dict = defaultdict(lambda: deque(maxlen=keep))
    for ev in parsed.events:
        if isinstance(ev, OpEvent):
            last[(ev.origin.pid, ev.origin.rank, ev.comm)].append(_key(ev))
    return {k: list(v) for k, v in last.items()}


def _others(parsed, cls=None) -> Counter:
    return Counter(_key(e) for e in parsed.events if not isinstance(e, OpEvent) and (cls is None or isinstance(e, cls)))


def _lines(parsed, kept=None) -> Counter:
    """(event, line number) of every event but the op events that `kept` (a scan) thinned away."""
    keep = None if kept is None else {_key(e) for e in kept.events if isinstance(e, OpEvent)}
    return Counter((_key(e), e.origin.line) for e in parsed.events
                   if keep is None or not isinstance(e, OpEvent) or _key(e) in keep)


def test_fixture_logs_exist():
    kinds = Counter(k for _, k in LOGS)
    assert kinds["nccl-log"] >= 30 and kinds["rank-log"] >= 30, kinds


@pytest.mark.parametrize("path,kind", LOGS, ids=[str(p.relative_to(FIXTURES)) for p, _ in LOGS])
def test_scan_equals_full_parse_on_real_logs(path, kind):
    full = _full(path, kind)
    # windows of 2 KB force head / middle / tail splits even on these small files
    scanned = logscan.scan_file(path, kind, mode="full", head_bytes=2048, tail_bytes=2048, ops_per_comm=K)
    assert _others(scanned) == _others(full)
    assert _last_ops(scanned) == _last_ops(full)
    assert _lines(scanned) == _lines(full, kept=scanned)  # a full scan keeps every event's real line number
    ht = logscan.scan_file(path, kind, mode="head-tail", head_bytes=2048, tail_bytes=2048, ops_per_comm=K)
    assert _last_ops(ht) == _last_ops(full)
    assert _others(ht, CommMember) == _others(full, CommMember)  # every comm's identity, middle inits found
    assert not (_others(ht) - _others(full))  # nothing invented
    assert ht.facts.get("world_size") == full.facts.get("world_size")
    assert ht.facts.get("rank") == full.facts.get("rank")


def _scenario_dirs():
    return sorted(d for root in (FIXTURES / "nccl", FIXTURES / "gloo") for d in root.iterdir()
                  if d.is_dir() and any(d.glob("node*")) and (d / "truth.json").exists())


@pytest.mark.parametrize("folder", _scenario_dirs(), ids=lambda d: f"{d.parent.name}/{d.name}")
def test_folder_verdict_same_as_full_load(folder):
    from parsers.gather.evidence import load_directory, load_path
    from parsers.judges.logs import correlate

    want = correlate(load_directory(folder)).culprit
    truth = json.loads((folder / "truth.json").read_text())
    assert want is not None and want.rank == truth["culprit_rank"]
    for mode in ("head-tail", "full"):
        got = correlate(load_path(folder, workers=2, log_mode=mode)).culprit
        assert got is not None and (got.rank, got.reason_class) == (want.rank, want.reason_class), mode


def _real_parts() -> tuple[bytes, bytes, bytes]:
    """A real NCCL log (chain scenario, rank 3) cut in three: lines before the first op, its op
    lines, and everything from the first op on (the split comm's init, the end of the run)."""
    src = FIXTURES / "nccl" / "chain" / "node03"
    real = next(src.glob("nccl.*.log")).read_bytes().splitlines(keepends=True)
    first_op = next(i for i, ln in enumerate(real) if b": opCount " in ln)
    ops = b"".join(ln for ln in real[first_op:] if b": opCount " in ln)
    return b"".join(real[:first_op]), ops, b"".join(real[first_op:])


def _big_from_real(tmp_path: Path, copies: int) -> Path:
    """A big NCCL log of real lines: the real head, its op lines repeated, then the real rest."""
    head, ops, rest = _real_parts()
    path = tmp_path / "big.log"
    path.write_bytes(head + ops * copies + rest)
    return path


def test_big_real_log_read_mostly_skipped(tmp_path):
    path = _big_from_real(tmp_path, copies=4000)  # ~9 MB of repeated op lines, then ~300 KB real rest
    full = _full(path, "nccl-log")
    ht = logscan.scan_file(path, "nccl-log", head_bytes=64 * 1024, tail_bytes=4096, ops_per_comm=K)
    scan = ht.facts["scan"]
    assert scan["bytes_read"] < scan["size"] / 10
    assert _last_ops(ht) == _last_ops(full)
    assert _others(ht, CommMember) == _others(full, CommMember)  # the split comm's init came from a backward search
    assert _others(ht, ErrorEvent) == _others(full, ErrorEvent)
    fs = logscan.scan_file(path, "nccl-log", mode="full", head_bytes=64 * 1024, tail_bytes=4096, ops_per_comm=K)
    assert _others(fs) == _others(full)
    assert fs.facts["scan"]["ops_parsed"] < 100  # the pre-filter kept op lines away from Python


def test_hole_in_the_middle_is_not_read(tmp_path):
    """A sparse file (a hole between real head and tail) and a line with no end: bounded work."""
    head, ops, _ = _real_parts()
    sparse = tmp_path / "sparse.log"
    with open(sparse, "wb") as fh:
        fh.write(head + ops)
        fh.seek(200 * 1024 * 1024)
        fh.write(ops * 10)
    ht = logscan.scan_file(sparse, "nccl-log", head_bytes=64 * 1024, tail_bytes=64 * 1024, ops_per_comm=K)
    assert ht.facts["scan"]["bytes_read"] < 2 * 1024 * 1024
    assert any(isinstance(e, OpEvent) for e in ht.events)
    os.truncate(sparse, 300 * 1024 * 1024)  # now the tail itself is a hole: nothing to find, still bounded
    ht = logscan.scan_file(sparse, "nccl-log", head_bytes=64 * 1024, tail_bytes=64 * 1024, ops_per_comm=K,
                           max_back_bytes=1024 * 1024)
    assert ht.facts["scan"]["bytes_read"] <= 2 * 1024 * 1024


def test_refuses_unknown_kind_and_mode(tmp_path):
    p = tmp_path / "x.log"
    p.write_text("x\n" * 100000)
    with pytest.raises(ValueError):
        logscan.scan_file(p, "fr-dump")
    with pytest.raises(ValueError):
        logscan.scan_file(p, "nccl-log", mode="middle")


def test_zero_fill_after_a_crash_is_no_line(tmp_path):
    """A crash can leave zero-filled ranges in a log (the size was extended, the data never written).
    The split comm's init sits right behind such a range, out of the tail window: the backward search
    finds it, the last ops are found behind the NULs at the end, and a NUL run ends a line, so no
    64 KB 'line' of NULs in front of the init reaches the line readers (they would walk it per regex)."""
    head, ops, _ = _real_parts()
    lines = head.splitlines(keepends=True)
    split = b"".join(ln for ln in lines if b"ncclCommSplit" in ln)
    assert split, "the chain fixture's rank 3 initialises a split communicator"
    plain = b"".join(ln for ln in lines if b"ncclCommSplit" not in ln)
    clean = tmp_path / "clean.log"
    clean.write_bytes(plain + ops * 100 + split + ops * 200)
    filled = tmp_path / "filled.log"
    filled.write_bytes(plain + ops * 100 + b"\0" * 300_000 + split + ops * 200 + b"\0" * 50_000)
    want = logscan.scan_file(clean, "nccl-log", head_bytes=8192, tail_bytes=8192, ops_per_comm=K)
    got = logscan.scan_file(filled, "nccl-log", head_bytes=8192, tail_bytes=8192, ops_per_comm=K)
    assert _last_ops(got) == _last_ops(want) and _last_ops(got)
    members = _others(got, CommMember)
    # the split's member, parent known
    assert members == _others(want, CommMember) and any(m[6] and m[7] for m in members)
    assert not (_others(got) - _others(want))
    assert got.facts["scan"]["parsed_bytes"] < want.facts["scan"]["parsed_bytes"] + 4096


@pytest.mark.integration  # a sweep: a pool of worker processes over many copies
def test_parallel_read_in_batches_equals_sequential(tmp_path):
    """More files than one worker batch: the pool's batches give the same artifacts, in the same
    order, as reading the files one by one."""
    from parsers.gather.evidence import read_batch, read_files
    from parsers.gather.source import FileRef, Hints

    sources = [p for p, kind in LOGS if kind == "nccl-log"][:8]
    refs = []
    n = 16 * 2 * 8 + 5  # more than 16 batches of 16 for 2 workers: the smallest batches, several per worker
    assert read_batch(n, 2) == 16
    for i in range(n):
        src = sources[i % len(sources)]
        dst = tmp_path / f"node{i:03d}" / src.name
        dst.parent.mkdir()
        dst.write_bytes(src.read_bytes())
        refs.append(FileRef(dst, str(dst.relative_to(tmp_path)), Hints()))
    seq = read_files(refs, workers=1, log_mode="head-tail")
    par = read_files(refs, workers=2, log_mode="head-tail")
    assert [a.rel for a in par] == [r.rel for r in refs]
    assert [(a.kind, a.error) for a in par] == [(a.kind, a.error) for a in seq]
    assert [_others(a.parsed) + Counter(map(_key, a.parsed.events)) for a in par] == \
        [_others(a.parsed) + Counter(map(_key, a.parsed.events)) for a in seq]


def test_mid_size_log_keeps_real_line_numbers(tmp_path):
    """A log between SCAN_BYTES and HEAD_TAIL_BYTES (read whole through the pre-filter by default):
    its errors and communicator inits after the head cite the line they are on, as the per-line
    reader does, so a report's file:line opens the right place."""
    from parsers.gather.evidence import HEAD_TAIL_BYTES, SCAN_BYTES, load_files

    path = _big_from_real(tmp_path, copies=300)
    assert SCAN_BYTES < path.stat().st_size < HEAD_TAIL_BYTES
    full = _full(path, "nccl-log")
    art = load_files([(path, None)]).artifacts[0]
    assert art.parsed.facts["scan"]["mode"] == "full"
    def cited(parsed, ops: bool) -> Counter:  # (event type, line): the load adds the rank it learnt
        return Counter((type(e).__name__, e.origin.line) for e in parsed.events if isinstance(e, OpEvent) == ops)

    assert cited(art.parsed, ops=False) == cited(full, ops=False)
    assert not cited(art.parsed, ops=True) - cited(full, ops=True)  # the ops kept, on their own lines
    head_lines = path.read_bytes()[:logscan.HEAD_BYTES].count(b"\n")
    assert max(line for (_t, line) in cited(art.parsed, ops=False)) > head_lines  # past the head too
