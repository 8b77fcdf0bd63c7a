"""Issue 39's matrix on the device (tests/fixtures/issue39/README.md, NCCL 2.28.9): the post-mortem logs folders.
An order mismatch that NCCL aborts names the rank that called the other collective, with the receiver that aborted
on 'message truncated' listed under it (item 3); a monitored barrier names the rank that never arrived, not the
reporter (item 2). Both seeds: other culprits, sizes and world sizes."""

from __future__ import annotations

import json
import tarfile
from pathlib import Path

import pytest

from forensics.report.words import analyze
from parsers import knowledge
from parsers.model.findings import CULPRIT_MIN_CONFIDENCE, ReasonClass

pytestmark = pytest.mark.integration  # 8-rank logs archives, analysed whole

CASES = Path(__file__).resolve().parents[2] / "fixtures" / "issue39" / "device"
KB = knowledge.load(use_env=False)


def truth(case: str) -> dict:
    return json.loads((CASES / case / "truth.json").read_text())


def named(v) -> set:
    return {s.rank for s in v.suspects if s.confidence >= CULPRIT_MIN_CONFIDENCE}


@pytest.mark.parametrize("seed", ["seed39", "seed40"])
def test_ordermismatch_the_odd_collective_heads_and_the_abort_follows(seed):
    case = f"{seed}-ordermismatch"
    v = analyze(CASES / case / "logs.tar.gz", KB).verdict
    culprit = truth(case)["culprit_ranks"]
    assert named(v) == set(culprit) and v.culprit.reason_class == ReasonClass.MISMATCH, v.text
    aborted = sorted(int(r) for r, code in truth(case)["exit_codes_by_rank"].items() if code == -6)
    stopped = {c.rank for c in v.culprit.consequences if c.reason_class == ReasonClass.FROZEN_IN_OP}
    assert stopped and stopped <= set(aborted)  # the receiver NCCL aborted is a consequence, not a rival


@pytest.mark.parametrize("seed", ["seed39", "seed40"])
def test_monbarrier_names_the_absent_rank(seed):
    case = f"{seed}-monbarrier"
    v = analyze(CASES / case / "logs.tar.gz", KB).verdict
    assert named(v) == set(truth(case)["culprit_ranks"]), v.text
    assert v.culprit.reason_class == ReasonClass.NAMED_ABSENT and 0 not in named(v)
    assert "first error" not in v.text  # the healthy ranks' warnings are no lead


def test_ordermismatch_whose_odd_rank_finished_is_read_from_its_finalize_copy():
    """Seed 41: the odd rank (2) finished its broadcast and exited 0 while the others aborted. Only the recorder's
    copy at its clean finalize holds what it called (issue 39 item 3): the logs folder names it for that."""
    case = "seed41-ordermismatch"
    v = analyze(CASES / case / "logs.tar.gz", KB).verdict
    assert named(v) == set(truth(case)["culprit_ranks"]) == {2}, v.text
    assert v.culprit.reason_class == ReasonClass.MISMATCH, v.text
    # wording is the behaviour: the call the odd rank made and the one the others made, from the recorder
    assert "called broadcast(" in v.culprit.reason and "allreduce(" in v.culprit.reason, v.culprit.reason
    live = analyze(CASES / case / "bundle.tar.gz", KB).verdict  # collected while ranks 0,1,3 hung, 2 a zombie
    assert named(live) == {2}, live.text  # (made before collect looked for its copy: it says 'exited')


def test_a_mismatch_heads_the_exit_it_explains(tmp_path):
    """Issue 39 item 3: the live bundle of seed 41 with the finalized rank's copy in its recorder folder, as
    collect now brings it (forensics/discover/exited.py; tests/forensics/discover/test_exited_recorder_copy.py):
    the call it made heads, its exit (code 0, a zombie) is listed under it."""
    with tarfile.open(CASES / "seed41-ordermismatch" / "bundle.tar.gz") as tar:
        tar.extractall(tmp_path, filter="data")
    with tarfile.open(CASES / "seed41-ordermismatch" / "logs.tar.gz") as tar:
        copy = tar.extractfile("logs/node02/nccl-recorder.node02.549.0.bin").read()
    bundle = tmp_path / "bundle"
    rel = "hosts/vm/rank2-pid549/recorder/nccl-recorder.node02.549.0.bin"
    (bundle / rel).parent.mkdir(parents=True)
    (bundle / rel).write_bytes(copy)
    manifest = json.loads((bundle / "manifest.json").read_text())
    for rank in manifest["ranks"]:
        for rec in rank["collectors"]:
            if rec["name"] == "recorder" and rank["pid"] == 549:
                rec.update(status="ok", error=None, files=[rel], details={"copied_ns": {rel: 0}})
    (bundle / "manifest.json").write_text(json.dumps(manifest))
    (bundle / "hosts" / "vm" / "digest.json").unlink()  # the host's digest was made without the copy
    v = analyze(bundle, KB).verdict
    assert v.culprit.rank == 2 and v.culprit.reason_class == ReasonClass.MISMATCH, v.text
    assert ReasonClass.EXITED in {c.reason_class for c in v.culprit.consequences}, v.text


#: seeds 42 and 43 (H100, 2026-12-07): each case's world size, culprit, sizes and fault step drawn anew; the
#: culprit's class live and post-mortem. Post-mortem has no stacks: the lock's holder and the rank outside any
#: collective are said from the logs as the rank that never logged the op the others wait in (the gap is said:
#: no-stacks). The subgroup's stalled rank, post-mortem, is the rank that never logged the others' op (seed 42) or,
#: where its peers' dumps hold the op and it left none (seed 43: its watchdog had nothing enqueued), the rank that
#: left no dump: both say it is absent from what the others hold.
SEEDS = {
    "gpusleep": ({ReasonClass.GPU_QUEUED}, {ReasonClass.GPU_QUEUED}),
    "lock": ({ReasonClass.WAIT_ROOT}, {ReasonClass.MISSING_LINE}),
    "monbarrier": ({ReasonClass.OUTSIDE}, {ReasonClass.NAMED_ABSENT}),
    "ordermismatch": ({ReasonClass.MISMATCH}, {ReasonClass.MISMATCH}),
    "subgroup": ({ReasonClass.WAIT_ROOT}, {ReasonClass.MISSING_LINE, ReasonClass.NO_DUMP}),
}


@pytest.mark.parametrize("seed", [42, 43])
@pytest.mark.parametrize("name", sorted(SEEDS))
@pytest.mark.parametrize("form", ["bundle", "logs"])
def test_seeded_cases_name_the_true_culprit_live_and_post_mortem(seed, name, form):
    case = f"seed{seed}-{name}"
    v = analyze(CASES / case / f"{form}.tar.gz", KB).verdict
    assert named(v) == set(truth(case)["culprit_ranks"]), v.text
    assert v.culprit.reason_class in SEEDS[name][form == "logs"], v.text
    assert v.deadlock is None and "first error" not in v.summary, v.text


@pytest.mark.parametrize("seed", [42, 43])
def test_seeded_lock_says_the_holding_thread_live(seed):
    """Item 4: the main thread waits on a lock that its own thread ckpt-writer holds; the why names it."""
    v = analyze(CASES / f"seed{seed}-lock" / "bundle.tar.gz", KB).verdict
    # wording is the behaviour: the thread and its frame are the why
    assert "thread 'ckpt-writer'" in v.summary and "write_shard_to_storage" in v.summary, v.summary
