"""A py-spy dump as users paste it: no 'Process N:' header, native frames with C/C++ sources.

The input is the real excerpt of text-generation-inference #2099 (tests/fixtures/realworld/tgi-2099.log).
"""

from __future__ import annotations

import shutil

from hf_testpaths import FIXTURES
from parsers import knowledge
from forensics.report.words import analyze
from parsers.readers import pyspy_text
from parsers.gather.registry import recognise
from parsers.stacks.classify import classify
from facts import says

PASTE = FIXTURES / "realworld" / "tgi-2099.log"


def test_a_headerless_dump_is_recognised_as_py_spy_text():
    head = PASTE.read_bytes()
    assert recognise(PASTE.name, head, complete=True).name == "pyspy-text"


def test_c_sources_are_native_frames_and_the_main_thread_gives_the_pid():
    with open(PASTE, encoding="utf-8") as fh:
        parsed = pyspy_text.parse_lines(fh)
    main = parsed.stacks[0]
    assert parsed.facts["pid"] == 1302975 and main.is_main
    assert all(f.native for f in main.frames)
    assert classify(main).kind == "collective"  # inside ncclAllReduce -> ncclGroupEnd, launching kernels


def test_the_summary_says_what_the_rankless_process_does(tmp_path):
    shutil.copy(PASTE, tmp_path)
    summary = analyze(tmp_path, knowledge.load(use_env=False)).verdict.text
    assert says(summary.splitlines(), "pid 1302975", "no rank", "ncclGroupEndInternal"), summary


SGLANG_30453 = FIXTURES / "realworld" / "sglang-30453.log"


def test_a_py_spy_dump_pasted_inside_a_log_is_read_with_its_pid():
    """sglang #30453 (real): SGLang's crash diagnostics print `Pyspy dump for PID 163685 (...)` and
    the dump below a rank's log; its threads are stacks of process 163685, next to the faulthandler
    dump of the process that aborted, and the line after the dump is the log's again."""
    from parsers.readers import rank_log

    with open(SGLANG_30453, encoding="utf-8") as fh:
        out = rank_log.parse_lines(fh, SGLANG_30453.name)
    spy = [t for t in out.stacks if t.source == "py-spy"]
    assert len(spy) == 13 and {t.origin.pid for t in spy} == {163685}
    main = [t for t in spy if t.is_main]
    assert len(main) == 1 and main[0].thread_id == 163685 and main[0].frames[0].function == "read"
    assert main[0].frames[-2].function == "<module>" and main[0].frames[-1].native
    assert [f.function for f in main[0].frames if not f.native][:2] == ["decorated", "_compute_mrope_positions"]
    assert any(t.source == "faulthandler" and t.is_main for t in out.stacks)


def test_a_py_spy_header_alone_in_a_log_is_no_stack():
    from parsers.model.events import Origin
    from parsers.readers import pyspy_text as pt

    block = pt.PySpyBlock()
    assert block.feed('Thread 164569 (idle): "Thread-2"', Origin())
    assert not block.feed("some other line", Origin())
    block.finish()
    assert block.stacks == []


def test_the_summary_names_the_pasted_py_spy_dump_and_its_pid(tmp_path):
    shutil.copy(SGLANG_30453, tmp_path)
    summary = analyze(tmp_path, knowledge.load(use_env=False)).verdict.text
    lines = summary.splitlines()
    assert says(lines, "py-spy dump", "pid 163685", "no rank", "sglang-30453.log:"), summary
    # the file names rank 1 only (its [163686] is a pid)
    assert says(lines, "faulthandler dump", "rank 1,", "sglang-30453.log:"), summary


def test_a_dump_of_another_process_does_not_take_the_files_rank(tmp_path):
    """sglang #30453's py-spy dump of pid 163685 below one rank's lines: the file's one rank is the writer's,
    not the dumped process's, so the stack keeps its rank unknown (as a launcher line naming a child does)."""
    from parsers.gather.evidence import load_files

    lines = (FIXTURES / "realworld" / "sglang-30453.log").read_text().splitlines(keepends=True)
    start = next(i for i, ln in enumerate(lines) if ln.startswith("Process 163685:"))
    path = tmp_path / "one-rank.log"
    path.write_text("[rank4]:[E707 07:20:43.220330280 ProcessGroupNCCL.cpp:1693] [Rank 4] something failed\n"
                    + "".join(lines[start:]))
    art = load_files([(path, {})]).artifacts[0]
    dumped = [t for t in art.parsed.stacks if t.origin is not None and t.origin.pid == 163685]
    assert dumped and {t.origin.rank for t in dumped} == {None}
    assert all(e.origin.rank == 4 for e in art.parsed.events)
