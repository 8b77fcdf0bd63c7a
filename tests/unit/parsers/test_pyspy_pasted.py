"""A py-spy dump as users paste it: no 'Process N:' header, native frames with C/C++ sources.

The input is the real excerpt of text-generation-inference #2099 (tests/fixtures/realworld/tgi-2099.log).
"""

from __future__ import annotations

import shutil

from hf_testpaths import FIXTURES
from parsers import knowledge
from parsers.analyze import analyze
from parsers.readers import pyspy_text
from parsers.registry import recognise
from parsers.stacks.classify import classify

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
    summary = analyze(tmp_path, knowledge.load(use_env=False)).verdict.summary
    assert "pid 1302975 (no rank printed)" in summary and "ncclGroupEndInternal" in summary
