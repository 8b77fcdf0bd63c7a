"""Torch's teardown warnings (issue 39 item 5): printed by ranks that finished; never an error, never a first
error or a lead against the rank that printed them. Real excerpts (tests/fixtures/issue39/README.md)."""

from __future__ import annotations

from pathlib import Path

import pytest

from forensics.report.words import analyze
from parsers import knowledge
from parsers.model.events import INFO_KINDS, Origin
from parsers.readers.c10d import match_line

EXCERPTS = Path(__file__).resolve().parents[2] / "fixtures" / "issue39" / "excerpts"
KB = knowledge.load(use_env=False)


@pytest.mark.parametrize("name", ["megatron-1541.log", "opensloth-17.log", "dmlcloud-61.log"])
def test_teardown_warnings_are_information(name, tmp_path):
    for line in (EXCERPTS / name).read_text().splitlines():
        events = match_line(line.split("]:", 1)[1], Origin())
        assert [e.kind for e in events] == ["c10d-teardown"] and "c10d-teardown" in INFO_KINDS
    (tmp_path / name).write_text((EXCERPTS / name).read_text())
    v = analyze(tmp_path, KB).verdict
    assert not v.suspects and v.culprit is None, v.text
    assert "first error" not in v.text and "c10d-warning" not in v.text

