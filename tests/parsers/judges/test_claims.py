"""A rank two processes claim (issue 43's stray rank, issue 40 item 3): the digest path names what the plain read
names, and the conflict is said with both sources.

Bundles built here: benchmarks/bundle_scale.py's 1,024-rank job (128 hosts x 8, every rank in an all_reduce, rank
43 one op behind) with rank 43 stopped (benchmarks/fleet_lies.py), plus (a) a stray process with RANK=43 on another
host, or (b) the host's own rank 72 saying RANK=43 (its NCCL log still says 72)."""

from __future__ import annotations

import pytest

from benchmarks.bundle_scale import write_bundle
from benchmarks.fleet_lies import add_stray, relabel, stop_rank, write_digests
from parsers import knowledge
from parsers.judges.claims import claims
from parsers.model.findings import ObservationKind
from forensics.report.words import analyze

KB = knowledge.load(use_env=False)


def _bundle(root, case: str):
    write_bundle(root, 1024, 8, 43)
    stopped_on = stop_rank(root, 43)
    other = add_stray(root, "node00010", 43) if case == "stray" else relabel(root, 72, 43)
    write_digests(root, KB)
    return stopped_on, other


@pytest.mark.parametrize("case", ["stray", "relabel"])
def test_a_rank_claimed_twice_is_named_by_both_paths(tmp_path, case):
    stopped_on, _ = _bundle(tmp_path, case)
    claimant = "node00010 pid 99999" if case == "stray" else "node00009 pid 10072"
    for kw in ({}, {"digests": False}):
        result = analyze(tmp_path, KB, **kw)
        v = result.verdict
        assert v.culprit is not None, (kw, v.summary)
        assert (v.culprit.rank, v.culprit.host, str(v.culprit.reason_class)) == (43, stopped_on, "stopped"), kw
        said = [line for line in v.shows if "claimed by 2 processes" in line]
        assert said and f"{stopped_on} pid 10043" in said[0] and claimant in said[0], (kw, v.shows)
        assert not any(s.rank == 72 and str(s.reason_class) == "absent" for s in v.suspects), kw
        facts = [o.facts for o in v.observations if o.kind is ObservationKind.CLAIM]
        assert facts == claims(result.evidence) and len(facts) == 1 and facts[0].rank == 43, kw
        assert facts[0].unclaimed == ((72,) if case == "relabel" else ()), kw
    focus = analyze(tmp_path, KB).verdict.sections["digests"]["focus"]
    assert stopped_on in focus["why"] and focus["hosts_read"] < 16, focus
