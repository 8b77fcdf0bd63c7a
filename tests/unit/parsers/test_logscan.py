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
from parsers.registry import HEAD_BYTES, recognise

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
    from parsers.evidence import load_directory, load_path
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
