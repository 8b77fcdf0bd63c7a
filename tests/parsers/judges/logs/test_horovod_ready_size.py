"""Horovod's ready lists read both ways once a launch line states the job's size (issue 42 item 5).

Real lines: horovod/horovod#100, one comment: 'I use horovod in Pod of kubernetes, with command `mpirun -np 2
pyton train.py`' and its stall report, whose every ready list holds rank 1 only
(tests/fixtures/realworld/horovod-100.log keeps the report alone, without the command: there the size is unknown
and no rank is named). The size from the command makes rank 0 the one every stalled op waits for; a command with a
larger size leaves several absent ranks, and none is named.
"""

from __future__ import annotations

import shutil
from pathlib import Path

from forensics.report.words import analyze
from parsers import knowledge
from parsers.gather.evidence import load_directory
from parsers.judges.logs import horovod

CORPUS = Path(__file__).resolve().parents[3] / "fixtures" / "realworld"
KB = knowledge.load(use_env=False)
COMMAND = "I use horovod in Pod of kubernetes, with command ` mpirun -np 2 pyton train.py`"


def _folder(tmp_path: Path, command: str | None) -> Path:
    report = (CORPUS / "horovod-100.log").read_text()
    (tmp_path / "horovod.log").write_text((command + "\n\n" if command else "") + report)
    return tmp_path


def test_without_the_size_no_rank_is_named(tmp_path):
    shutil.copy(CORPUS / "horovod-100.log", tmp_path)
    assert analyze(tmp_path, KB).verdict.culprit is None


def test_the_commands_size_names_the_absent_rank(tmp_path):
    ev = load_directory(_folder(tmp_path, COMMAND))
    [suspect] = horovod.stalled(ev)
    assert suspect.rank == 0
    v = analyze(tmp_path, KB).verdict
    assert v.culprit is not None and v.culprit.rank == 0


def test_a_larger_size_leaves_several_absent_and_names_none(tmp_path):
    ev = load_directory(_folder(tmp_path, COMMAND.replace("-np 2", "-np 4")))
    assert horovod.stalled(ev) == []
