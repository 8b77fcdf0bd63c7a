"""Verdicts on real NCCL 2.28.9 jobs captured on the H200 machine (8 ranks as 8 hosts, recorder loaded).

Fixtures: tests/fixtures/device/h200_issue14.tar.gz (hangs: live bundle and post-mortem files) and
h200_issue15.tar.gz (running jobs collected mid-run, two rounds each); see
tests/fixtures/device/README.md for how they were made. Each case's truth.json was written by
the scenario driver (scripts/device/live_scenarios.py), not by the analysis.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from parsers import knowledge
from forensics.report.words import analyze
from parsers.input.archive import extract_into
from parsers.model.findings import ReasonClass

pytestmark = pytest.mark.integration  # it starts real processes (it was under tests/integration)


FIX = Path(__file__).resolve().parents[2] / "fixtures" / "device"
KB = knowledge.load(use_env=False)


@pytest.fixture(scope="module")
def captures(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("h200")
    for name in ("h200_issue14.tar.gz", "h200_issue15.tar.gz", "h200_issue15_ns.tar.gz", "h200_run3.tar.gz"):
        extract_into(FIX / name, root)
    return root


def _truth(case: Path) -> dict:
    return json.loads((case / "truth.json").read_text())


#: Issue 14: the reason each hang must be named with, live (bundle) and post-mortem (files).
HANGS = {
    "gpusleep": ({"gpu-queued"}, None),
    "oom": (None, {"known-error", "raised"}),
    "spawn": ({"outside-collective"}, {"missing-line"}),
    "lateinit": ({"never-joined"}, {"never-joined"}),
    "dataloader": ({"wait-root", "data-wait"}, {"missing-line"}),
    "busy": ({"wait-root", "outside-collective"}, {"missing-line"}),
}


@pytest.mark.parametrize("case", sorted(HANGS))
def test_hang_culprit_and_reason(captures: Path, case: str):
    root = captures / "h200_issue14" / case
    truth = _truth(root)
    live, post = HANGS[case]
    for part, classes in (("live", live), ("postmortem", post)):
        verdict = analyze(root / part, KB).verdict
        c = verdict.culprit
        if classes is None:
            assert c is None or c.rank == truth["culprit_rank"], verdict.summary  # never another rank
            continue
        if part == "live" and case in SNAPSHOT_ONLY:  # one snapshot, nothing time-stamped (issue 26, 2.1)
            assert verdict.hang == "not established" and c is None, verdict.summary
            c = verdict.suspects[0]
            assert c.demotion is not None and c.demotion.unproven, c.to_dict()
        assert c is not None and c.rank == truth["culprit_rank"], (part, verdict.summary)
        assert str(c.reason_class) in classes, (part, c.to_dict())


#: live captures whose only evidence of the hang is one look (a rank that never joined leaves no recorder
#: state and no NCCL op to date): no hang culprit from them, the rank is the first lead with its reason
SNAPSHOT_ONLY = {"lateinit"}


def test_gpu_side_wait_is_said_in_the_users_terms(captures: Path):
    verdict = analyze(captures / "h200_issue14" / "gpusleep" / "live", KB).verdict
    c = verdict.culprit
    assert c.reason_class == ReasonClass.GPU_QUEUED and "GPU" in c.reason and c.confidence >= 0.85
    # how long the work ahead of it has held the stream, and to when (the times: line says when that is)
    # wording is the behaviour: issue 27's rule, every age says from when
    assert " s before the collection time" in c.reason
    assert any("GPU utilisation" in e and "100% [nvidia-smi]" in e for e in c.evidence), c.evidence
    assert c.evidence[0].startswith("now: state")  # its own state first
    assert c.demotion is None


def test_culprit_block_says_what_it_does_or_how_it_ended(captures: Path):
    busy = analyze(captures / "h200_issue14" / "busy" / "live", KB).verdict.culprit
    assert "main thread" in busy.evidence[1] and "preprocess_shard" in busy.evidence[1]
    assert "state R" in busy.evidence[0]
    loader = analyze(captures / "h200_issue14" / "dataloader" / "live", KB).verdict.culprit
    assert any("DataLoader worker pid" in e and "ShardDataset.__getitem__" in e for e in loader.evidence[:3])
    oom = analyze(captures / "h200_issue14" / "oom" / "postmortem", KB).verdict.culprit
    assert any(e.startswith("last exception:") and "torch.OutOfMemoryError: CUDA out of memory" in e
               for e in oom.evidence[:2])


#: Issue 15: who is slow, per case (None: nobody may be named). These captures predate the
#: recorder's ns op stamps (4 ms coarse clock): slow5 is found from the ranks' own waits, whose
#: median deficit is one tick for rank 6 and 0 for every healthy rank.
RUNNING = {"slow300": [5], "slow30": [2], "slowhost": [2, 3], "healthy": None, "slow5": [6]}


@pytest.mark.parametrize("case", sorted(RUNNING))
def test_running_job_is_no_hang_and_the_straggler_is_named(captures: Path, case: str):
    root = captures / "h200_issue15" / case
    rounds = sorted(p for p in root.iterdir() if p.name.startswith("round"))
    assert rounds
    for r in rounds:
        verdict = analyze(r, KB).verdict
        assert verdict.summary.startswith("no hang"), verdict.summary
        assert verdict.sections["progress"]["running"] is True
        slow = verdict.sections["stragglers"]
        want = RUNNING[case]
        if want is None:
            assert slow["late"] == [] and verdict.culprit is None, verdict.summary
        else:
            assert slow["late"] == want, slow
            assert verdict.culprit.rank in want
            assert str(verdict.culprit.reason_class) == ("slow-host" if len(want) > 1 else "straggler")
        assert slow["measure"] == "wait" and slow["source"] == "NCCL recorder"
    if case == "slowhost":
        assert "host node01 (ranks 2-3)" in verdict.summary


@pytest.mark.parametrize("case", ["slow5", "healthy"])
def test_running_job_from_the_files_it_leaves(captures: Path, case: str, tmp_path: Path):
    """The recorder's state files and NCCL logs copied flat, no manifest (what a user copies off
    the job's log folder while it runs): the heartbeat dates the copy, so it is still 'no hang',
    and the straggler (or nobody) is the same as from the bundle."""
    last = sorted(p for p in (captures / "h200_issue15" / case).iterdir() if p.name.startswith("round"))[-1]
    for f in last.rglob("*"):
        if f.suffix in (".bin", ".log") and ("nccl" in f.name):
            (tmp_path / f.name).write_bytes(f.read_bytes())
    verdict = analyze(tmp_path, KB).verdict
    assert verdict.summary.startswith("no hang"), verdict.summary
    assert verdict.sections["stragglers"]["late"] == ([6] if case == "slow5" else [])


#: from timestamped NCCL COLL lines (enter times, µs stamps) alone; in the first H200 run slow5's 5 ms
#: shows as 2.3-2.6 ms of mean enter lateness against 1.5 ms of noise (op-by-op jitter and the ranks' steady
#: enter offsets): under 3x, not named (issue 26; the recorder's own waits name it).
FROM_COLL_LOG = {"slow300": [5], "slow30": [2], "slowhost": [2, 3], "healthy": [], "slow5": []}
#: the same from the second H200 run: slow5's rank 6 enters 5.4 ms late on average against 0.6 ms of jitter
#: (issue 26: the fixed 8 ms enter floor named nobody here)
FROM_COLL_LOG_NS = {**FROM_COLL_LOG, "slow5": [6]}


@pytest.mark.parametrize("case", sorted(FROM_COLL_LOG))
def test_straggler_from_nccl_coll_log_stamps(captures: Path, case: str, tmp_path: Path):
    """Without the recorder: the bundle less its recorder files. Hang or progress is then not decided
    from time, so who arrives last is shown (section 'stragglers', judged False), never a culprit."""
    last = sorted(p for p in (captures / "h200_issue15" / case).iterdir() if p.name.startswith("round"))[-1]
    for f in last.rglob("*"):
        if f.is_file() and f.suffix != ".bin":
            dest = tmp_path / f.relative_to(last)
            dest.parent.mkdir(parents=True, exist_ok=True)
            dest.write_bytes(f.read_bytes())
    verdict = analyze(tmp_path, KB).verdict
    slow = verdict.sections.get("stragglers", {"late": [], "judged": False})
    assert slow["late"] == FROM_COLL_LOG[case] and slow["judged"] is False
    if slow["late"]:
        assert slow["source"] == "NCCL COLL log" and slow["measure"] == "enter"
    assert verdict.culprit is None or str(verdict.culprit.reason_class) not in ("straggler", "slow-host")


@pytest.mark.parametrize("case", sorted(RUNNING))
def test_straggler_by_how_much_with_the_ns_recorder(captures: Path, case: str):
    """The recorder stamping op enter and completion with the ns clock (h200_issue15_ns: the second
    H200 run, 3 rounds, 4 for healthy): every straggler named in every round with its lateness within
    20% of what the driver injected (slow_by_ms_per_step), and healthy rounds name nobody."""
    root = captures / "h200_issue15_ns" / case
    truth = _truth(root)
    rounds = sorted(p for p in root.iterdir() if p.name.startswith("round") and p.is_dir() and "." not in p.name)
    assert len(rounds) >= 3
    for r in rounds:
        verdict = analyze(r, KB).verdict
        assert verdict.summary.startswith("no hang"), verdict.summary
        slow = verdict.sections["stragglers"]
        # issue 26: no fixed floor; the bar is 2.5x the job's own jitter (their waits' op-by-op spread)
        assert slow["measure"] == "wait" and slow["threshold_ms"] == pytest.approx(2.5 * slow["jitter_ms"], abs=0.01)
        assert slow["late"] == truth["slow_ranks"], slow
        want = truth["slow_by_ms_per_step"]
        got = [slow["lateness_ms"][str(rank)] for rank in truth["slow_ranks"]]
        # a slow host's ranks also wait for each other, so each one's own deficit is a little smaller
        assert got == [] or abs(max(got) - want) <= 0.2 * want, got
        assert all(g >= 0.6 * want for g in got), got
        if not truth["slow_ranks"]:
            assert max(abs(v) for v in slow["lateness_ms"].values()) < 0.5  # healthy: noise well under the floor


@pytest.mark.parametrize("case", sorted(RUNNING))
def test_two_ras_reads_tell_a_running_job_without_the_recorder(captures: Path, case: str, tmp_path: Path):
    """No recorder files: the driver's two RAS JSON reads 1.5 s apart (as `collect` now makes them:
    ras_status.json, then ras_status_later.json) show every rank's collective count growing, so the
    job is 'no hang' and the straggler is judged from the NCCL COLL stamps (enter times)."""
    r = captures / "h200_issue15_ns" / case / "round1"
    for f in r.rglob("*"):
        if f.is_file() and f.suffix != ".bin" and f.name != "manifest.json":  # a folder, as a user copies it
            dest = tmp_path / f.relative_to(r)
            dest.parent.mkdir(parents=True, exist_ok=True)
            dest.write_bytes(f.read_bytes())
    ras = r.parent / "round1.ras"
    host = tmp_path / "hosts" / "vm"
    (host / "ras_status.json").write_bytes((ras / "ras_a.json").read_bytes())
    (host / "ras_status_later.json").write_bytes((ras / "ras_b.json").read_bytes())
    verdict = analyze(tmp_path, KB).verdict
    assert verdict.summary.startswith("no hang"), verdict.summary
    assert "NCCL RAS" in verdict.sections["progress"]["source"]
    slow = verdict.sections["stragglers"]
    assert slow["source"] == "NCCL COLL log" and slow["measure"] == "enter"
    assert slow["late"] == FROM_COLL_LOG_NS[case]


def test_ras_reads_of_a_hung_job_decide_nothing(captures: Path, tmp_path: Path):
    """The same pair of reads with the later one replaced by the first (counts that did not move): not
    'running', and never 'hung' from RAS alone."""
    from parsers.judges.progress import judge_ras_progress
    from parsers.gather.evidence import load
    from parsers.gather.source import open_source

    ras = captures / "h200_issue15_ns" / "slow5" / "round1.ras"
    (tmp_path / "ras_status.json").write_bytes((ras / "ras_a.json").read_bytes())
    (tmp_path / "ras_status_later.json").write_bytes((ras / "ras_a.json").read_bytes())
    with open_source(tmp_path) as src:
        ev = load(src, KB.line_filter)
    assert judge_ras_progress(ev.artifacts).decided is False


def test_oom_rank_already_a_zombie_is_named_live_with_how_it_ended(captures: Path):
    """H200 run 3: rank 7 died of CUDA OOM before collection and is a zombie (its launcher had not reaped it);
    `collect --pid` was given every rank's pid. The dead rank is kept, its rank read from its own recorder
    file, and the live verdict says how it ended, first."""
    root = captures / "h200_run3" / "oom"
    truth = _truth(root)
    assert truth["proc_states"]["before_collect"]["7"] == "Z"
    c = analyze(root / "live", KB).verdict.culprit
    assert c.rank == truth["culprit_rank"] and c.pid == truth["culprit_pid"]
    assert str(c.reason_class) == "exited" and "exit code 1" in c.reason and c.confidence >= 0.9
    assert c.evidence[0].startswith("now: state Z")
    assert any("RANK" in e and "recorder file" in e for e in c.evidence), c.evidence  # how its rank is known
    # its own stderr
    assert c.evidence[1].startswith("last exception:") and "torch.OutOfMemoryError: CUDA out of memory" in c.evidence[1]
    assert any("siblings' naming" in e and e.endswith("node07/rank7.stderr") for e in c.evidence), c.evidence
    assert not any(a.reason_class == "absent" for a in c.agreeing)  # it has a process: a zombie one


def test_slow_host_verdict_says_what_its_ranks_do_from_samples(captures: Path):
    """H200 run 3, collected with --samples 10: the slow host's rank is seen in the work that makes it late."""
    v = analyze(captures / "h200_run3" / "slowhost" / "round1", KB).verdict
    assert v.summary.startswith("no hang") and str(v.culprit.reason_class) == "slow-host"
    line = next(e for e in v.culprit.evidence if e.startswith("samples:"))
    assert "augment_batch (live_scenarios.py:" in line and "pyspy-samples.json" in line


@pytest.fixture(scope="module")
def links_run(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("h200_links")
    extract_into(FIX / "h200_links.tar.gz", root)
    return root / "h200_links"


#: Issue 15 item 4, the sixth H200 run (recorder send waits): case -> (slow links, late ranks)
LINKS = {"slowlink": (["3->4"], []), "slownet": ([], []), "healthy": ([], []), "slow30": ([], [2])}


@pytest.mark.parametrize("case", sorted(LINKS))
def test_slow_link_told_from_straggler_and_job_wide_pace(links_run: Path, case: str):
    """A slow link (one rank's sends paced) is named as the link, with every rank on time; every link
    paced alike (a job-wide slowdown) names nothing; a straggler is a straggler and no link; healthy: nobody.
    Both rounds of each case, from the live bundles alone."""
    truth = _truth(links_run / case)
    links, late = LINKS[case]
    assert truth["slow_senders"] == ([3] if case == "slowlink" else list(range(8)) if case == "slownet" else [])
    for r in ("round0", "round1"):
        v = analyze(links_run / case / r, KB).verdict
        assert v.summary.startswith("no hang"), v.summary
        assert v.sections["links"]["slow"] == links and v.sections["links"]["timed"] is True
        assert v.sections["links"]["measure"] == "sum"  # files of then: the steps' times added, read so
        assert v.sections["stragglers"]["late"] == late, v.sections["stragglers"]
        if links:
            assert str(v.culprit.reason_class) == "slow-link" and v.culprit.rank == 3 and v.culprit.host == "node03"
            assert "rank 3 (node03) -> rank 4 (node04)" in v.summary
            excess = v.sections["links"]["excess_ms"]["3->4"]
            assert 20 < excess < 40, excess  # the pacing: 4 ns a byte of each op's 1.75 MB a link, plus its syscalls
        elif late:
            assert str(v.culprit.reason_class) == "straggler" and v.culprit.rank in late
        else:
            assert v.culprit is None, v.summary
            # a line of its own under a short summary
            assert any("one pace" in line for line in v.text.splitlines()[1:]), v.text


@pytest.fixture(scope="module")
def run7(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("h200_run7")
    extract_into(FIX / "h200_run7.tar.gz", root)
    return root / "h200_run7"


def test_slow_sends_out_of_one_rank_under_a_tree(run7: Path):
    """NCCL_ALGO=Tree: rank 3 sends to four peers; all four of its links slow, and only they: named as the
    rank's sends, not as four separate links, with every rank on time."""
    for r in ("round0", "round1"):
        v = analyze(run7 / "slowtree" / r, KB).verdict
        links = v.sections["links"]
        assert links["slow"] == ["3->1", "3->2", "3->5", "3->7"] and links["sender"] == 3, links
        assert v.sections["stragglers"]["late"] == []
        assert str(v.culprit.reason_class) == "slow-link" and v.culprit.rank == 3
        # one sender, its four peers
        assert all(f in v.summary for f in ("rank 3 (node03)", "to ranks 1-2,5,7")), v.summary


def test_armed_job_straggler_incident_on_nccl(run7: Path):
    """forensics.arm() in a real 8-rank NCCL job: rank 0's watch fired one straggler incident naming rank 5;
    its leader's bundle carries every rank's published steps, and analyze names rank 5 from the recorder
    and from the attached step series alike; the straggler's own link is its echo, not a slow link."""
    incident = json.loads((run7 / "armed" / "incident.json").read_text())
    assert incident["kind"] == "straggler" and incident["suspects"] == [5] and incident["leader"] is True
    assert "--attach" in incident["argv"] and "--samples" in incident["argv"]
    bundle = run7 / "armed" / "incident_bundle"
    assert sorted(p.name for p in (bundle / "job" / "attached").iterdir()) == [f"steps-rank{r}.csv" for r in range(8)]
    v = analyze(bundle, KB).verdict
    assert v.summary.startswith("no hang"), v.summary
    assert v.culprit.rank == 5 and str(v.culprit.reason_class) == "straggler"
    assert v.sections["stragglers"]["late"] == [5] and v.sections["steps"]["late"] == [5]
    assert abs(v.sections["stragglers"]["lateness_ms"]["5"] - 300) < 30
    assert v.sections["links"]["slow"] == []
    assert any(e.startswith("samples:") and "augment_batch" in e for e in v.culprit.evidence)
