"""Every line reader of the registry is linear in its input (issue 40 item 5): each real text fixture of a line
kind is read through `read_file` (recognised by the registry, as analyze reads it) at n and 10n copies of its
lines, in the same run; the time ratio must stay far below the 100 of a quadratic reader (generous slack for a
loaded machine). JSON and binary kinds are whole documents (their bounds: tests of bounded_json and each reader)."""

from __future__ import annotations

import time
from pathlib import Path

from hf_testpaths import FIXTURES
from parsers.gather import registry
from parsers.gather.evidence import read_file
from parsers.readers import ras
from parsers.gather.source import FileRef

#: kinds read line by line, whose input can be scaled by repeating its lines
LINE_KINDS = {"nccl-log", "rank-log", "ras-text", "pyspy-text", "gdb-text", "faulthandler-text", "fr-report",
              "kernel-log", "df", "nvidia-smi-text"}


def _one_per_kind() -> dict[str, Path]:
    found: dict[str, Path] = {}
    for path in sorted(FIXTURES.rglob("*")):
        if not path.is_file() or not 200 < path.stat().st_size < 64_000 or path.suffix in (".json", ".bin", ".gz"):
            continue
        art = read_file(FileRef(path, path.name))
        if art.kind in LINE_KINDS and art.kind not in found:
            found[art.kind] = path
    return found


def _seconds(path: Path) -> float:
    t = time.perf_counter()
    read_file(FileRef(path, path.name))
    return time.perf_counter() - t


def test_each_line_reader_is_linear(tmp_path):
    kinds = _one_per_kind()
    assert len(kinds) >= 5 and set(kinds) <= set(registry.BY_NAME), kinds  # the fixtures hold most line kinds
    assert ras.looks_like_text(kinds["ras-text"].read_text())  # RAS's own test: test_ras_linear.py
    ratios = {}
    for kind, path in kinds.items():
        data = path.read_bytes()
        copies = max(1, 20_000 // len(data))
        small, big = tmp_path / f"{kind}.1", tmp_path / f"{kind}.10"
        small.write_bytes(data * copies)
        big.write_bytes(data * copies * 10)
        base = min(_seconds(small) for _ in range(2))
        ten = min(_seconds(big) for _ in range(2))
        ratios[kind] = round(ten / max(base, 1e-4), 1)
        assert ten < 40 * base + 0.2, (kind, path, base, ten)
    print(ratios)
