"""Issue 14 on real gloo jobs (tests/fixtures/gloo14, captured here with scripts/device/nccl_scenarios.py):
the culprit and the reason in the user's terms, from the live bundle and from the files left after."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from parsers import knowledge
from forensics.report.words import analyze

pytestmark = pytest.mark.integration  # it starts real processes (it was under tests/integration)

FIX = Path(__file__).resolve().parents[2] / "fixtures" / "gloo14"
KB = knowledge.load(use_env=False)

#: case -> (reason classes allowed live, post-mortem; None: no rank but the truth may be named)
CASES = {
    "oom": ({"known-error", "raised"}, {"known-error", "raised"}),
    "busy": ({"outside-collective"}, {"missing-line"}),
    "dataloader": ({"data-wait"}, {"missing-line"}),
    "lateinit": ({"never-joined"}, {"never-joined"}),
    "spawn": ({"outside-collective"}, None),  # post-mortem: no rank's error names the dead rank, files of 3 of 4
}
#: live bundles collected before collect's second look, with nothing time-stamped: one snapshot names no hang
#: culprit (issue 26, 2.1), so the rank is the first lead, its reason kept; the oom rank's own error stands
SNAPSHOT_ONLY = {"busy", "dataloader", "lateinit", "spawn"}


def lead_or_culprit(verdict, case: str, part: str):
    """The culprit, or for a snapshot-only live bundle the first lead (checked to be an unproven lead)."""
    if part == "live" and case in SNAPSHOT_ONLY:
        assert verdict.hang == "not established" and verdict.culprit is None, verdict.summary
        lead = verdict.suspects[0]
        assert lead.demotion is not None and lead.demotion.unproven, lead.to_dict()
        return lead
    return verdict.culprit


@pytest.mark.parametrize("case", sorted(CASES))
def test_culprit_and_reason(case: str):
    truth = json.loads((FIX / case / "truth.json").read_text())
    for part, classes in zip(("live", "postmortem"), CASES[case]):
        verdict = analyze(FIX / case / part, KB).verdict
        c = lead_or_culprit(verdict, case, part)
        if classes is None:
            assert c is None or c.rank == truth["culprit_rank"], verdict.summary
            continue
        assert c is not None and c.rank == truth["culprit_rank"], (part, verdict.summary)
        assert str(c.reason_class) in classes, (part, c.to_dict())


def test_spawned_ranks_without_rank_in_their_environment_are_judged():
    """mp.spawn: RANK is set inside the process, so /proc/PID/environ lacks it; the collector recovered
    the rank from py-spy --locals, and the verdict names the sleeping rank."""
    result = analyze(FIX / "spawn" / "live", KB)
    assert {r.record.rank_source for r in result.evidence.ranks} == {"py-spy-locals"}
    c = lead_or_culprit(result.verdict, "spawn", "live")
    assert c.rank == 1 and "slow_data_loader" in c.reason


def test_the_oom_ranks_own_traceback_leads():
    c = analyze(FIX / "oom" / "postmortem", KB).verdict.culprit
    # its end first, from the launcher's record; its own traceback next
    assert (c.evidence[0].startswith("ended:") and "code 1" in c.evidence[0]
            and c.evidence[0].endswith("[launcher record]"))
    assert c.evidence[1].startswith("last exception:") and "torch.OutOfMemoryError: CUDA out of memory" in c.evidence[1]


def test_a_dataloader_wait_names_the_worker_and_its_frame():
    c = lead_or_culprit(analyze(FIX / "dataloader" / "live", KB).verdict, "dataloader", "live")
    assert "DataLoader worker pid" in c.reason and "ShardDataset.__getitem__" in c.reason


def test_a_late_rank_at_init_is_named_with_what_it_does():
    c = lead_or_culprit(analyze(FIX / "lateinit" / "live", KB).verdict, "lateinit", "live")
    assert c.reason_class == "never-joined" and "rank_main" in c.reason
