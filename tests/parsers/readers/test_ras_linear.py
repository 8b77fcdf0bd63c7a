"""The RAS readers are linear in their input (issue 40 item 5: 10,000 rank lines took 26 s, 20,000 116 s, because
each plain rank line rescanned every rank line of its block). Inputs built here on the shape of the real report
in tests/fixtures/nccl_x2/mixed/sleep/ras_verbose.txt (NCCL 2.28.9) and NVIDIA/nccl#1911's count groups."""

from __future__ import annotations

import json
import time
from pathlib import Path

from hf_testpaths import FIXTURES
from parsers.gather.evidence import read_file
from parsers.readers import ras
from parsers.gather.source import FileRef


def _text(n: int) -> list[str]:
    lines = ["#0-0 (962a1ff397ed0ea2) MISMATCH\n", "  Communicator ranks have different AllReduce operation counts\n",
             f"  {n} ranks have launched up to operation 640\n", f"  {n} ranks have launched up to operation 641\n"]
    lines += [f"  Rank {r} -- GPU {r % 8} managed by process {1000 + r} on node 10.0.{r // 256}.{r % 256}\n"
              for r in range(n)]
    return lines


def _json(n: int) -> dict:
    ranks = [{"rank": r, "pid": 1000 + r, "host": f"n{r}",
              "collective_counts": {"AllReduce": 5 + (r == 3), f"Op{r}": 1}}
             for r in range(n)]
    return {"communicators": [{"hash": "ab", "ranks": ranks}]}


def _seconds(fn, arg) -> float:
    t = time.perf_counter()
    fn(arg)
    return time.perf_counter() - t


def test_the_text_report_is_linear():
    small, big = _text(2000), _text(20000)
    out = ras.parse_text(big)
    assert sum(1 for e in out.events if e.comm_rank is not None) == 20000
    base, ten = _seconds(ras.parse_text, small), _seconds(ras.parse_text, big)
    assert ten < 30 * base + 0.5, (base, ten)  # quadratic was 100x


def test_the_json_report_is_linear_and_caps_operation_names():
    base, ten = _seconds(ras.parse_json, _json(1000)), _seconds(ras.parse_json, _json(10000))
    assert ten < 30 * base + 0.5, (base, ten)
    out = ras.parse_json(_json(1000))
    assert any("operation names" in p for p in out.problems)


def test_counts_of_other_types_count_nothing():
    doc = {"communicators": [{"hash": "ab", "ranks": [
        {"rank": 0, "pid": 1, "collective_counts": {"AllReduce": {}}},
        {"rank": 1, "pid": 2, "collective_counts": {"AllReduce": float("inf")}},
        {"rank": 2, "pid": 3, "collective_counts": [1, 2]},
        {"rank": 3, "pid": 4, "collective_counts": {"AllReduce": 7}}], "missing_ranks": [{"rank": 9, "status": []}]}]}
    out = ras.parse_json(json.loads(json.dumps(doc)))
    behind = {e.comm_rank for e in out.events if e.kind == "behind"}
    assert behind == {0, 1, 2} and not out.problems


def _report_file(path: Path, n: int) -> Path:
    """The real report (tests/fixtures/nccl_x2/mixed/sleep/ras_verbose.txt) with its mismatch block grown to `n`
    rank lines of its own two shapes: the issue's input was 10,000 such lines (26 s)."""
    real = (FIXTURES / "nccl_x2/mixed/sleep/ras_verbose.txt").read_text()
    head = real[:real.index("#0-0 ")]
    lines = ["#0-0 (962a1ff397ed0ea2) MISMATCH\n", "  Communicator ranks have different AllReduce operation counts\n",
             f"  {n // 2} ranks have launched up to operation 11\n"]
    lines += [f"  Rank {r} has launched up to operation 10 -- GPU {r % 8} managed by process {1000 + r} on node "
              f"10.0.{r // 256}.{r % 256}\n" if r % 2 else
              f"  Rank {r} -- GPU {r % 8} managed by process {1000 + r} on node 10.0.{r // 256}.{r % 256}\n"
              for r in range(n)]
    path.write_text(head + "".join(lines))
    return path


def test_a_report_of_10000_rank_lines_is_read_in_linear_time_alone(tmp_path):
    """The issue's input on its own, through the registry as analyze reads it: 1,000 and 10,000 rank lines, best of
    two each; a reader that rescans its block per line takes 100x as long for 10x the lines."""
    small, big = _report_file(tmp_path / "ras1k.txt", 1000), _report_file(tmp_path / "ras10k.txt", 10_000)
    art = read_file(FileRef(big, big.name))
    assert art.kind == "ras-text" and art.error is None and not art.parsed.problems, (art.kind, art.error)
    assert sum(1 for e in art.parsed.events if e.comm_rank is not None) >= 10_000
    base = min(_file_seconds(small) for _ in range(2))
    ten = min(_file_seconds(big) for _ in range(2))
    assert ten < 30 * base + 0.5, (base, ten)


def _file_seconds(path: Path) -> float:
    t = time.perf_counter()
    read_file(FileRef(path, path.name))
    return time.perf_counter() - t
