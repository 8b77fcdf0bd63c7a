"""Issue 16 items 2, 7 and 10: every reader is total on hostile input (fixed seed, mutated real fixtures).

The benchmark (benchmarks/fuzz_readers.py) runs the same mutator for 100,000 inputs; here
5,000 keep CI fast. An exception out of `read_file` (the registry's one entry point for a
file) fails the test with the input that caused it.
"""

from __future__ import annotations

import re
import tarfile
from pathlib import Path

import pytest

from benchmarks.fuzz_readers import run
from parsers.pipeline.analyze import analyze
from parsers.gather.evidence import read_file
from parsers.gather.source import FileRef

FIX = Path(__file__).resolve().parents[2] / "fixtures"


@pytest.mark.integration  # a sweep: 5,000 fuzzed inputs
def test_five_thousand_mutated_real_inputs_raise_nothing():
    res = run(5000, seed=16)
    assert res["inputs"] == 5000
    assert res["exceptions"] == [], res["exceptions"][:3]


def test_a_pickle_that_asks_for_a_giant_memo_is_refused(tmp_path: Path):
    """Found by the fuzzer: 'LONG_BINPUT 308812145' in a 4 KB dump made the unpickler allocate gigabytes."""
    import pickletools

    dump = bytearray((FIX / "nccl/sleep/node00/fr_live_rank_0").read_bytes())
    pos = next(pos for op, arg, pos in pickletools.genops(bytes(dump)) if op.name == "BINPUT")
    dump[pos:pos + 2] = b"r" + (308812145).to_bytes(4, "little")  # BINPUT n -> LONG_BINPUT 308812145
    p = tmp_path / "fr_trace_rank_0"
    p.write_bytes(bytes(dump))
    art = read_file(FileRef(p, p.name))
    assert art.kind == "fr-dump" and art.parsed is None and "memo index" in art.error


def test_a_long_hostile_line_does_not_hide_the_log(tmp_path: Path):
    """A 70 KB line of record-like fragments (the quadratic case of the issue) and a 5000-digit number:
    the rest of the NCCL log is read as before."""
    src = FIX / "nccl/sleep/node05/nccl.node05.483.log"
    lines = src.read_text().splitlines(True)
    want = len(read_file(FileRef(src, src.name)).parsed.events)
    op = next(k for k, line in enumerate(lines) if "opCount" in line)
    lines[op] = re.sub(r"opCount \w+", "opCount " + "9" * 5000, lines[op])
    lines.insert(3, "a:1:1 [0] " * 7000 + "\n")
    p = tmp_path / src.name
    p.write_text("".join(lines))
    art = read_file(FileRef(p, p.name))
    assert art.error is None and art.kind == "nccl-log"
    assert len(art.parsed.events) >= want - 1


@pytest.mark.parametrize("nested", [200])
def test_deep_folders_and_a_bomb_archive_are_bad_input_not_a_crash(tmp_path: Path, nested: int):
    deep = tmp_path / "deep"
    d = deep
    for _ in range(nested):
        d = d / "d"
    d.mkdir(parents=True)
    (d / "rank0.log").write_text("hello\n")
    result = analyze(deep)
    assert any("deeper than" in why for _, why in result.evidence.skipped)
    bomb = tmp_path / "bomb.tar.gz"
    with tarfile.open(bomb, "w:gz") as tar:
        zeros = tmp_path / "zeros"
        with open(zeros, "wb") as fh:
            fh.truncate(300 * 1024 * 1024)
        tar.add(zeros, arcname="logs/rank0.log")
    zeros.unlink()
    from parsers.input.errors import InputError

    with pytest.raises(InputError, match="archive refused"):
        analyze(bomb)
