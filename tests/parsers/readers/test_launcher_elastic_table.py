"""torchelastic's ChildFailedError table where a paste starts inside it, or prints it in torch 1.9's layout (issue 42).

Real tables (tests/fixtures/realworld): FangyunWei/SLRT#66 opens on entry [3]'s exitcode line and lists ranks 4-7
before its Root Cause; microsoft/nnscaler#10 opens on its last failure's host line; pytorch/pytorch#121209 on entry
[1]'s host line; isekai-portal/Link-Context-Learning#11 is one entry's tail alone; pytorch/pytorch#65041 shows torch
1.9's 'Root Cause:' / unpadded fields; hiyouga/LlamaFactory#701 has accelerate test's 'stderr: ' before each line.
Every listed rank, exit code and host must be read, each entry keeping its section's role.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from parsers import knowledge
from parsers.model.events import Origin
from parsers.readers import launcher, rank_log
from forensics.report.words import analyze

CORPUS = Path(__file__).resolve().parents[2] / "fixtures" / "realworld"


def _entries(stem: str) -> list[tuple]:
    parsed = rank_log.parse_lines((CORPUS / f"{stem}.log").read_text().splitlines(), f"{stem}.log")
    return [(e.kind, e.data.rank, e.data.exitcode, e.data.pid, e.data.host)
            for e in parsed.events if getattr(e, "kind", "") in ("child-failure", "root-cause")]


@pytest.mark.parametrize("stem, expected", [
    ("slrt-66", [("child-failure", None, 1, 2680833, None)]
     + [("child-failure", r, 1, 2680830 + r, "server") for r in (4, 5, 6, 7)]
     + [("root-cause", 0, 1, 2680830, "server")]),
    ("nnscaler-10", [("child-failure", 7, 1, 4227, "12011bc99720"), ("root-cause", 0, 1, 4220, "12011bc99720")]),
    ("pytorch-121209", [("child-failure", r, 1, 69811 + r, "vmnuvocinpoc") for r in (1, 2, 3)]
     + [("root-cause", 0, 1, 69811, "vmnuvocinpoc")]),
    ("lcl-11", [("child-failure", 1, 1, 8181, None)]),
    ("pytorch-65041", [("root-cause", 0, 1, 1092727, None)]),
    ("llamafactory-701", [("child-failure", 1, 1, 8835, "wph178"), ("child-failure", 2, 1, 8836, "wph178"),
                          ("child-failure", 3, None, None, "wph178")]),
])
def test_every_entry_of_a_table_read_from_its_middle(stem, expected):
    assert _entries(stem) == expected


def test_a_log_line_that_only_resembles_a_field_opens_no_entry():
    """The table pads its labels and its values have their own shape; a log's 'host: x' or 'rank : 3' is no entry."""
    block = launcher.ElasticBlock()
    for text in ("host: gpu-node-1", "rank : 3", "time      :", "exitcode: 1", "rank      : three (local_rank: 3)"):
        taken, done = block.feed(text, Origin())
        assert (taken, done) == (False, [])
    assert block.finish() == []


def test_a_tie_of_times_says_which_rank_torchelastic_saw_exit_first(tmp_path):
    """SLRT#66: ranks 0 and 4-7 all exit at 13:24:04; the times do not order them, torchelastic's Root Cause does
    (the first exit its agent saw), and the verdict says so without naming a culprit."""
    shutil.copy(CORPUS / "slrt-66.log", tmp_path)
    result = analyze(tmp_path, knowledge.load(use_env=False))
    assert result.verdict.culprit is None
    # wording is the behaviour: the summary names the Root Cause's rank among the tied ones
    assert "from ranks 0,4-7" in result.verdict.text and "torchelastic saw rank 0 exit first" in result.verdict.text
