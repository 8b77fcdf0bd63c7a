"""scripts/wording_asserts.py: it finds an assert that pins a sentence, keeps a marked one apart, and the
tests hold none unmarked (issue 29: tests assert behaviour, not wording)."""

from __future__ import annotations

import textwrap
from pathlib import Path

from hf_testpaths import REPO
from script_module import load_script


def _script():
    return load_script("wording_asserts")



def test_a_sentence_assert_is_found_and_a_marked_one_is_kept(tmp_path: Path):
    wa = _script()
    tests = tmp_path / "tests"
    tests.mkdir()
    (tests / "test_x.py").write_text(textwrap.dedent('''
        def test_x(summary, rank):
            assert summary == "rank 3 is stopped and the others wait on it"
            assert f"rank {rank} left no dump while the others wait" in summary
            assert summary.startswith("no culprit named because nothing")
            assert says([summary], "the whole sentence hidden in a fact")
            assert "rank 3" in summary and summary.count("rank") == 1
            assert "/logs/nccl.%h.%p.log" in summary
            # wording is the behaviour: a help text
            assert "exit codes of the command" in summary
        '''))
    hits = wa.scan(tmp_path)
    assert [(h.line, h.kept) for h in hits] == [(3, False), (4, False), (5, False), (6, False), (10, True)]


def test_the_tests_pin_no_sentence_unmarked():
    pinned = [f"{h.path.relative_to(REPO)}:{h.line}: {h.literal[:80]!r}" for h in _script().scan(REPO) if not h.kept]
    assert pinned == [], ("assert the behaviour (rank, class, host, fields) or mark why the words are it:\n"
                          + "\n".join(pinned))
