"""The reduced tree's root analysis (forensics.fleet.tree_verdict.tree_analysis): the ranks the gateways keep are
collected, never absent, and a gateway's rank set is data: a set as large as the rank numbers go is listed no
further than the largest job believed."""

from __future__ import annotations

import json
import shutil

from hf_testpaths import FIXTURES
from forensics.fleet.tree_verdict import tree_analysis
from parsers import knowledge
from forensics.report.words import analyze

KB = knowledge.load(use_env=False)


def test_a_hostile_rank_set_from_the_gateways_is_bounded_and_counted_within_the_world(tmp_path):
    dst = tmp_path / "b"
    shutil.copytree(FIXTURES / "nccl" / "sleep" / "bundle", dst, symlinks=True)
    alone = analyze(dst, KB).verdict
    tree = tree_analysis(dst, KB, [[0, (1 << 31) - 2]]).verdict  # every rank number a merged digest may hold
    cov = tree.sections["coverage"]
    assert cov["world_size"] == 8 and cov["ranks_reporting"] == 8 and not cov["absent_sample"], cov
    assert tree.culprit is not None and alone.culprit is not None
    assert (tree.culprit.rank, str(tree.culprit.reason_class)) == (alone.culprit.rank, str(alone.culprit.reason_class))


def test_ranks_the_gateways_keep_are_not_absent(tmp_path):
    """A bundle of 3 of the job's 8 ranks, the other 5 on the gateways: no 'absent' suspect names them, and the
    coverage says how many were read here."""
    dst = tmp_path / "b"
    shutil.copytree(FIXTURES / "nccl" / "sleep" / "bundle", dst, symlinks=True)
    man = json.loads((dst / "manifest.json").read_text())
    man["ranks"] = [r for r in man["ranks"] if r["rank"] in (0, 1, 2)]
    (dst / "manifest.json").write_text(json.dumps(man))
    v = tree_analysis(dst, KB, [[0, 7]]).verdict
    assert not [s for s in v.suspects if str(s.reason_class) == "absent"], v.suspects
    cov = v.sections["coverage"]
    assert cov["ranks_reporting"] == 8 and cov["ranks_read_raw"] == 3 and cov["ranks_from_merged_digest"] == 5, cov
    bare = analyze(dst, KB).verdict  # the same files without the gateways' word: 5 ranks absent
    assert {s.rank for s in bare.suspects if str(s.reason_class) == "absent"} == {3, 4, 5, 6, 7}
