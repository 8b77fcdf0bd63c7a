"""The VERDICT line and the culprit lines never disagree (issue 39 item 1), over every fixture bundle and logs
folder and every real-world excerpt: a deadlock headline has no culprit beside it (parsers/pipeline/merge.find_deadlock
decides both), and a named culprit is the one the headline names.

Why over every fixture: the disagreement seen ("deadlock: ranks 6, 7 ..." above "culprit: rank 3") came from two
steps deciding apart; any input where they still can is a case this finds.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from forensics.report.text import verdict_block
from forensics.report.words import analyze
from parsers import knowledge
from parsers.input.archive import extract_into

pytestmark = pytest.mark.integration  # every fixture analysed: minutes, not seconds

FIX = Path(__file__).resolve().parents[2] / "fixtures"
KB = knowledge.load(use_env=False)


def disagreement(v) -> str | None:
    """What makes the headline and the culprit lines disagree, or None."""
    said = v.summary
    if (v.deadlock is not None) != said.startswith("deadlock:"):
        return f"deadlock {v.deadlock is not None} but the headline says: {said[:120]}"
    if v.deadlock is not None and v.culprits:
        return f"a deadlock headline with culprit lines: {[c.label for c in v.culprits]}"
    for c in v.culprits:
        host_named = c.reason_class == "slow-host" and f"host {c.host}" in said  # a host's culprit: the host
        if c.label not in said and (c.rank is None or f"rank {c.rank} " not in said) and not host_named:
            return f"culprit {c.label} is not the one the headline names: {said[:160]}"
    block = verdict_block(v)
    if v.deadlock is not None and any(line.startswith("  culprit:") for line in block):
        return "a deadlock VERDICT line with a culprit line under it"
    return None


def _inputs() -> list[Path]:
    """Every archive analyze reads as it is, and every bundle folder (a manifest.json) under the fixtures."""
    out = sorted(p for d in ("issue26", "i39") for p in (FIX / d).glob("*/*.tar.gz"))
    out += sorted(p.parent for p in FIX.rglob("manifest.json") if "realworld" not in p.parts)
    return out


@pytest.mark.parametrize("path", _inputs(), ids=lambda p: str(p.relative_to(FIX)))
def test_headline_and_culprit_agree_on_every_fixture(path):
    v = analyze(path, KB).verdict
    assert disagreement(v) is None, (disagreement(v), v.text)


@pytest.mark.parametrize("archive", sorted((FIX / "device").glob("*.tar.gz")), ids=lambda p: p.name)
def test_headline_and_culprit_agree_on_every_device_capture(archive, tmp_path):
    extract_into(archive, tmp_path)
    seen = 0
    for case in sorted(p for p in tmp_path.glob("*/*") if p.is_dir()):
        for form in sorted(p for p in case.iterdir() if p.is_dir()):
            v = analyze(form, KB).verdict
            assert disagreement(v) is None, (str(form.relative_to(tmp_path)), disagreement(v), v.text)
            seen += 1
    assert seen  # the archive held cases


def test_headline_and_culprit_agree_on_every_real_world_excerpt(tmp_path):
    excerpts = sorted((FIX / "realworld").glob("*.log"))
    assert len(excerpts) > 100
    for log in excerpts:
        folder = tmp_path / log.stem
        folder.mkdir()
        shutil.copy(log, folder)
        v = analyze(folder, KB).verdict
        assert disagreement(v) is None, (log.name, disagreement(v), v.text)


def test_a_deadlock_headline_leaves_no_culprit_line():
    v = analyze(FIX / "issue26" / "deadlock" / "logs.tar.gz", KB).verdict
    assert v.deadlock is not None and disagreement(v) is None
    assert not [line for line in verdict_block(v) if line.startswith("  culprit:")]
