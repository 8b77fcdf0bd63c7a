"""Issue 31, item 4: each reader defect the independent fuzzer found, as a regression test.

Each test feeds the reproducer to the real reader (or the whole analysis) and asserts it ends,
in bounded time and memory, with an answer or a recorded problem.
"""

from __future__ import annotations

import json
import mmap
import shutil
import signal
import time
from collections import Counter
from pathlib import Path

import pytest

from hf_testpaths import FIXTURES
from parsers.analyze import analyze
from parsers.evidence import AbsentRanks, Coverage

OP_LINE = (b"h:1:1 [0] NCCL INFO AllReduce: opCount 0 sendbuff 0x1 recvbuff 0x1 count 1 datatype 7 op 0 root 0 "
           b"comm 0xab [nranks=2] stream 0x1\n")


class _Late(Exception):
    pass


@pytest.fixture
def deadline():
    """deadline(s): raise _Late in the test after s seconds (the loops under test return to Python each step)."""
    def fire(*_):
        raise _Late()

    old = signal.signal(signal.SIGALRM, fire)
    yield lambda s: signal.setitimer(signal.ITIMER_REAL, s)
    signal.setitimer(signal.ITIMER_REAL, 0)
    signal.signal(signal.SIGALRM, old)


def test_last_ops_walk_ends_below_16k_from_its_start(tmp_path, deadline):
    """The backward walk once passed a negative end to mmap.rfind (counted from the file's end) and went on
    for ever when a counted key was never found (found by the fuzzer: 69 op lines, a 37 KB line, start 4135)."""
    from parsers.readers import logscan

    path = tmp_path / "nccl.log"
    path.write_bytes(OP_LINE * 69 + b"y" * 37303 + b"\n")
    with path.open("rb") as f, mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as mm:
        deadline(5)
        got = logscan._last_ops(mm, 4135, len(mm), 32, Counter({(b"1", b"0xab"): 10, (b"2", b"0xcd"): 1}))
    assert len(got) == 10 and all(4135 <= a < b <= len(OP_LINE) * 69 for a, b in got)


def _analyse_folder(tmp_path: Path, name: str, text: str):
    folder = tmp_path / "in"
    folder.mkdir(exist_ok=True)
    (folder / name).write_text(text)
    t = time.perf_counter()
    result = analyze(folder)
    return result, time.perf_counter() - t


def test_rank_log_record_start_is_not_cubic(tmp_path):
    """`[W` and 2,400 digits took 25 s (three overlapping digit repeats in the record-start pattern)."""
    lines = "[rank0]: hello\n" + ("[W" + "1" * 2400 + "\n") * 2
    _, took = _analyse_folder(tmp_path, "rank0.stderr", lines)
    assert took < 5


def test_c10d_nccl_error_is_not_quadratic(tmp_path):
    """80,000 spaces after 'NCCL error in:' took 18 s (a lazy message before `\\s*$`)."""
    line = "[rank0]:[E1129 07:18:19.556497288 ProcessGroupNCCL.cpp:689] NCCL error in: x.cpp:1, unhandled" + " " * 80000 + "x\n"
    _, took = _analyse_folder(tmp_path, "rank0.stderr", line)
    assert took < 5


def test_nccl_error_still_read_with_trailing_blanks():
    from parsers.model.events import Origin
    from parsers.readers import c10d

    events = c10d.match_line("RuntimeError: NCCL error in: ../x.cpp:1, unhandled system error, NCCL version 2.21.5  \t",
                             Origin())
    assert events and events[0].data["nccl_version"] and events[0].data["where"] == "../x.cpp:1"


def test_init_complete_with_four_billion_ranks(tmp_path):
    """`nranks 4000000000` in an Init COMPLETE line: 19 GB (the coverage built range(nranks))."""
    folder = tmp_path / "in"
    folder.mkdir()
    src = FIXTURES / "nccl/sleep/node05/nccl.node05.483.log"
    text = src.read_text().replace("rank 5 nranks 8 cudaDev", "rank 5 nranks 4000000000 cudaDev")
    assert "nranks 4000000000" in text
    (folder / src.name).write_text(text)
    t = time.perf_counter()
    result = analyze(folder)
    assert time.perf_counter() - t < 5
    assert result.evidence.coverage.world_size != 4000000000


def test_world_size_16m_in_environ(tmp_path):
    """WORLD_SIZE=16777216 in environ.json: 2.2 GB (Coverage.absent built the whole range)."""
    proc = FIXTURES / "nccl/sigstop/bundle/hosts/vm/rank3-pid686"
    dst = tmp_path / "in" / proc.name
    shutil.copytree(proc, dst)
    env = json.loads((dst / "environ.json").read_text())
    env["WORLD_SIZE"] = "16777216"
    (dst / "environ.json").write_text(json.dumps(env))
    t = time.perf_counter()
    result = analyze(tmp_path / "in")
    assert time.perf_counter() - t < 5
    cov = result.evidence.coverage
    assert not cov.complete


def test_absent_ranks_are_gaps_not_a_range():
    """Coverage.absent of a world of 2^40 ranks costs what the reporting ranks cost."""
    cov = Coverage(world_size=1 << 40, world_source="test", reporting=frozenset({0, 1, 5}), from_manifest=False)
    absent = cov.absent
    assert len(absent) == (1 << 40) - 3
    assert absent[:4] == [2, 3, 4, 6] and absent[-1] == (1 << 40) - 1 and 5 not in absent and 7 in absent
    assert not cov.complete and cov.to_dict()["absent_sample"][:3] == [2, 3, 4]


def test_absent_ranks_match_the_list_they_replace():
    import random

    rng = random.Random(7)
    for _ in range(300):
        world = rng.randrange(0, 60)
        present = {rng.randrange(-3, 70) for _ in range(rng.randrange(0, 40))}
        want = [r for r in range(world) if r not in present]
        got = AbsentRanks(world, present)
        assert list(got) == want and len(got) == len(want) and [got[i] for i in range(len(want))] == want
