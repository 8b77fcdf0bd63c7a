"""gdb's `thread apply all bt` text as pasted into an issue (NVIDIA/nccl#901, tests/fixtures/realworld)."""

from __future__ import annotations

import shutil

from hf_testpaths import FIXTURES
from parsers import knowledge
from forensics.report.words import analyze
from parsers.readers import gdb_text
from parsers.gather.registry import recognise
from parsers.stacks.classify import classify
from facts import says

PASTE = FIXTURES / "realworld" / "nccl-901.log"


def _parsed(text: str):
    return gdb_text.parse_lines(text.splitlines(keepends=True))


def test_recognised_and_read_as_one_process():
    assert recognise(PASTE.name, PASTE.read_bytes(), complete=True).name == "gdb-text"
    parsed = _parsed(PASTE.read_text())
    main = parsed.stacks[0]
    assert (parsed.facts["pid"], main.is_main, len(main.frames)) == (496115, True, 18)
    assert [f.function for f in main.frames[12:]] == ["__cudart803", "cudaLaunchKernel", "ncclLaunchKernel",
                                                      "doLaunches",
                                                      "groupLaunch", "ncclGroupEndInternal"]
    assert (main.frames[14].file, main.frames[14].line) == ("enqueue.cc", 1092)
    assert main.frames[0].library == "/lib/x86_64-linux-gnu/libcuda.so"
    assert classify(main).kind == "collective"
    assert parsed.unknown_lines == 0


def test_a_second_process_pasted_below_is_not_mixed_in():
    parsed = _parsed(PASTE.read_text() * 2)
    assert len(parsed.stacks) == 1 and "second process" in parsed.problems[0]


def test_the_summary_says_what_the_main_thread_does(tmp_path):
    shutil.copy(PASTE, tmp_path)
    summary = analyze(tmp_path, knowledge.load(use_env=False)).verdict.summary
    assert says([summary], "pid 496115", "no rank", "ncclGroupEndInternal"), summary
