"""A known error on a line of a log that is no one rank's is that line's rank's (issue 42 item 1): DDP's reducer
error names the rank in its own words, and that rank becomes the code fault's suspect, with torch's advice.

Real excerpts: open-mmlab/mmdetection#8626 (rank 3), open-mmlab/mmpose#3111 (rank 2), showlab/Tune-A-Video#78 (rank 0).
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from forensics.report.words import analyze
from parsers import knowledge
from parsers.gather.evidence import load_directory
from parsers.judges import hosts
from parsers.model.findings import ReasonClass

CORPUS = Path(__file__).resolve().parents[2] / "fixtures" / "realworld"
KB = knowledge.load(use_env=False)


@pytest.mark.parametrize("stem, rank", [("mmdet-8626", 3), ("mmpose-3111", 2), ("tune-a-video-78", 0)])
def test_the_ddp_error_is_the_named_ranks_code_fault(tmp_path, stem, rank):
    shutil.copy(CORPUS / f"{stem}.log", tmp_path)
    found = hosts.rank_log_findings(load_directory(tmp_path), KB)
    subjects = {f.subject for fs in found.values() for f in fs if f.entry.id == "ddp-unused-parameters"}
    assert f"rank {rank}" in subjects
    v = analyze(tmp_path, KB).verdict
    assert v.culprit.rank == rank and v.culprit.reason_class is ReasonClass.KNOWN_ERROR
    assert "find_unused_parameters=True" in v.culprit.reason and "fix the code" in v.culprit.action


def test_a_line_without_a_rank_stays_the_logs(tmp_path):
    shutil.copy(CORPUS / "mmdet3d-488.log", tmp_path)
    found = hosts.rank_log_findings(load_directory(tmp_path), KB)
    assert {f.subject for fs in found.values() for f in fs} == {"job log"}


def test_the_same_known_error_on_every_rank_blames_no_rank(tmp_path):
    """horovod/horovod#3871 (WSL2): both ranks print NCCL's missing-sysfs-path WARN; the host (its environment) is
    suspect, no rank is (each rank's line alone would have named it)."""
    shutil.copy(CORPUS / "horovod-3871.log", tmp_path)
    found = hosts.rank_log_findings(load_directory(tmp_path), KB)
    subjects = {f.subject for fs in found.values() for f in fs if f.entry.id == "nccl-topo-no-sysfs-path"}
    assert subjects >= {"rank 0", "rank 1"}
    result = analyze(tmp_path, KB)
    assert result.verdict.culprit is None
    assert [h.host for h in result.hosts if h.status == "suspect"] == ["ce1a35ee222c"]
