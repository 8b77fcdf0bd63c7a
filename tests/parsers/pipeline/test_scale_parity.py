"""Scale parity (issue 43, "Show it"): a fault capture replicated to a fleet gives, through the host digests and
their merge (the default `analyze` of a bundle whose hosts wrote digests), the culprit, why and evidence kinds
that the plain read of every file (`analyze --no-digests`) gives.

Each case is a live capture under tests/fixtures whose own plain read names a culprit, replicated to
`PARITY_RANKS` ranks (default 1,024, the focus's own threshold; the issue asks 4,096: HF_PARITY_RANKS=4096,
about 4x the time, ~2 min a case on the 2-core VM, which would add an hour to `.ci/run`), by
tests/support/replicate.py (its own ranks kept, the others healthy copies of one rank its verdict does not name,
8 to a host), digests made for every host as `collect` makes them. The plain read at fleet size must still name the capture's culprit and why (else the
replica, not the scale path, is wrong); then the digest path must agree with it.

Cost: at 1,024 ranks a case is ~30 s of reading on the 2-core VM (the plain read reads every file): integration
only."""

from __future__ import annotations

import json
import os
from typing import Any

import pytest

from forensics.report.words import analyze
from hf_testpaths import FIXTURES
from parsers.readers.recorder import read_recorder_file
from replicate import KB, culprit_key, fleet
PARITY_RANKS = int(os.environ.get("HF_PARITY_RANKS", "1024"))

#: Left out: the six nccl_x2 captures (two GPUs' ranks in mixed and p2p communicators). At 1,024 ranks the replica of
#: nccl_x2/mixed/kill loses its fault (its plain read names no culprit where the capture's names rank 3 absent:
#: measured 2026-12-07, the replica tool's limit, not the scale path's); the other five were not measured.
#: every bundle fixture whose own plain read names a culprit or a deadlock (tests/parsers/scale/test_digest.py's
#: BUNDLES less the six that name none: gloo14 busy/dataloader/lateinit/spawn, host/h200, issue26/slow5-noisy):
#: never logged the op, stopped, killed, mismatch, chain, recorder captures, two hosts, gloo, issue 26's live
#: faults (went ahead, deadlock, lock, order, pipeline, stragglers, subgroup, two sinks) and issue 39's p2p ones
CAPTURES = [
    "nccl/sleep/bundle", "nccl/sigstop/bundle", "nccl/kill/bundle", "nccl/mismatch/bundle", "nccl/chain/bundle",
    "recorder/preload_nccl2289/sleep/bundle", "recorder/preload_nccl2289/sigstop/bundle",
    "gloo14/oom/live",
    "issue26/ahead/bundle.tar.gz", "issue26/deadlock/bundle.tar.gz", "issue26/lock/bundle.tar.gz",
    "issue26/order/bundle.tar.gz", "issue26/pipeline/bundle.tar.gz", "issue26/slow300norec/bundle.tar.gz",
    "issue26/slow5/bundle.tar.gz", "issue26/subgroup/bundle.tar.gz", "issue26/twosinks/bundle.tar.gz",
    "i39/pipestall-seed39/bundle.tar.gz", "i39/sendsend-seed39/bundle.tar.gz", "i39/sendsend-seed40/bundle.tar.gz",
    "i39/wrongpeer-seed39/bundle.tar.gz", "i39/wrongpeer-seed40/bundle.tar.gz",
    "issue39/gloo-i39/lock/bundle.tar.gz", "issue39/gloo-i39/monbarrier/bundle.tar.gz",
    "issue39/gloo-i39/subgroup/bundle.tar.gz",
]

#: cases that fail today, with what was measured (benchmarks/results/scale_parity-1024-2026-12-07.md, 1,024 ranks;
#: strict). No case so far has the digest path disagree with the plain read; these three fail because the replica
#: changes the fault: the copies of rank 0 keep its recorder proxy ops' peers (comm ranks 1 and 7), so the plain read
#: of the fleet sees a thousand waiters on 1 and 7 (tests/support/replicate.py's limit, not the scale path's)
_PEERS = "replica limit: copies keep rank 0's recorder peers 1 and 7; "
KNOWN_DISAGREEMENTS: dict[str, str] = {
    "nccl/kill/bundle": _PEERS + "plain read at 1,024 ranks: deadlock (1, 7), not rank 7 absent (digest path: the same)",
    "nccl/mismatch/bundle": _PEERS + "plain read at 1,024: deadlock (1, 7), not rank 1 absent (digest path: the same)",
    "nccl/chain/bundle": _PEERS + "plain read at 1,024: rank 3 outside-collective, not wait-root (digest path: the same)",
}


def _case(capture: str) -> Any:
    why = KNOWN_DISAGREEMENTS.get(capture)
    marks = [pytest.mark.xfail(strict=True, reason=why)] if why else []
    return pytest.param(capture, marks=marks, id=capture.removesuffix("/bundle.tar.gz").removesuffix("/bundle"))


@pytest.mark.integration  # minutes a case at 4,096 ranks: every file of the fleet read once by the plain read
@pytest.mark.parametrize("capture", [_case(c) for c in CAPTURES])
def test_digest_path_names_the_plain_reads_culprit_at_fleet_size(capture, tmp_path):
    root, own = fleet(FIXTURES / capture, tmp_path, PARITY_RANKS)
    plain = analyze(root, KB, digests=False).verdict
    assert [k[:3] for k in culprit_key(plain)] == [k[:3] for k in culprit_key(own)], "the replica changed the fault"
    digest = analyze(root, KB).verdict
    assert digest.sections.get("digests"), "the digest path was not taken"
    assert culprit_key(digest) == culprit_key(plain), digest.sections["digests"].get("focus")


def test_replica_keeps_the_fault_and_multiplies_the_healthy_rank(tmp_path):
    """64 ranks from the 8-rank sleep capture: every copy says one identity in its manifest record, environment
    and NCCL log; the plain read and the digest path both still name the sleeper, for the same reason."""
    root, own = fleet(FIXTURES / "nccl" / "sleep" / "bundle", tmp_path, 64)
    man = json.loads((root / "manifest.json").read_text())
    assert sorted(r["rank"] for r in man["ranks"]) == list(range(64))
    assert {r["world_size"] for r in man["ranks"]} == {64}
    copy = next(r for r in man["ranks"] if r["rank"] == 40)
    env = json.loads((root / copy["dir"] / "environ.json").read_text())
    assert (env["RANK"], env["WORLD_SIZE"]) == ("40", "64")
    log = next((root / copy["dir"] / "nccl").glob("*.log")).read_text()
    assert "rank 40 nranks 64" in log and f"{copy['host']}:{copy['pid']}:" in log
    rec = read_recorder_file(next((root / copy["dir"]).rglob("nccl-recorder.*.bin")))
    assert (rec.rank, rec.nranks, rec.env_rank, rec.pid, rec.host) == (40, 64, 40, copy["pid"], copy["host"])
    assert len({(r["host"], r["pid"]) for r in man["ranks"]}) == 64
    plain = analyze(root, KB, digests=False).verdict
    assert culprit_key(plain)[0][:3] == culprit_key(own)[0][:3]
    assert culprit_key(analyze(root, KB).verdict) == culprit_key(plain)
