"""Judges on real excerpts, checked directly (the verdict tests check only the outcome)."""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path

from forensics.report.words.facts import observed as worded
from parsers.gather.evidence import load as load_evidence
from parsers.judges.exceptions import died_first
from parsers.model.events import ErrorEvent
from parsers.model.findings import ReasonClass
from parsers.gather.source import open_source
from _load import load
from facts import observed, says

CORPUS = Path(__file__).resolve().parents[2] / "fixtures" / "realworld"


def _evidence(stem: str, tmp: str):
    shutil.copy(CORPUS / f"{stem}.log", tmp)
    with open_source(Path(tmp)) as src:
        return load_evidence(src)


def test_worker_death_before_the_first_timeout_is_the_first_failure():
    """vLLM #6042: 'Worker VllmWorkerProcess pid 1159 died, exit code: -6', then rank 0 times out."""
    with tempfile.TemporaryDirectory() as tmp:
        found = died_first(_evidence("vllm-6042-border", tmp))
    assert [(s.pid, s.rank, s.reason_class) for s in found] == [(1159, None, ReasonClass.EXITED_FIRST)]
    assert "ALLREDUCE SeqNum 2" in found[0].reason


def test_worker_death_after_an_exception_is_not_a_first_failure():
    """vLLM #9839: the watchdog's C++ exception comes first; the worker's -6 is its consequence."""
    with tempfile.TemporaryDirectory() as tmp:
        assert died_first(_evidence("vllm-9839", tmp)) == []


def test_a_sigabrt_exit_of_a_rank_that_times_out_with_the_others_is_its_own_watchdog_abort():
    """ColossalAI #3556: the launcher's 'failed (exitcode: -6) local_rank: 0' is pasted above the log, then ranks
    0, 1, 3, 6 and 7 time out in BROADCAST SeqNum 27962: rank 0's abort is its watchdog's, not a first failure."""
    with tempfile.TemporaryDirectory() as tmp:
        assert died_first(_evidence("colossalai-3556", tmp)) == []


def test_a_stuck_watchdog_after_the_ranks_own_timeout_is_its_aftermath():
    """NeMo #9563: rank 1 times out in BROADCAST, then its heartbeat monitor reports the watchdog stuck (the
    abort hangs): both monitor lines are the wait's aftermath. Fuser #3055's stuck watchdogs follow no timeout."""
    from parsers.judges.hosts import heartbeat_aftermath

    with tempfile.TemporaryDirectory() as tmp:
        assert heartbeat_aftermath(_evidence("nemo-9563", tmp)) == {("nemo-9563.log", 4), ("nemo-9563.log", 6)}
    with tempfile.TemporaryDirectory() as tmp:
        assert heartbeat_aftermath(_evidence("fuser-3055", tmp)) == set()


def test_lines_after_a_ras_report_are_read_as_the_job_log():
    """NCCL #1730: a RAS report, then rank 118's watchdog timeout: both read from the one file."""
    parsed = load(CORPUS / "nccl-1730.log")
    assert [p.kind for p in parsed] == ["ras-text"]
    errors = [(e.kind, e.origin.rank, e.seq, e.origin.line) for e in parsed[0].events if isinstance(e, ErrorEvent)]
    assert errors == [("watchdog-timeout", 118, 2398459, 24), ("failure-detected", 118, 2398459, 25)]


def test_watchdog_lines_at_one_seqnum_in_different_ops_are_a_tied_mismatch():
    """NCCL #1409: rank 7 times out in BROADCAST, rank 3 in ALLREDUCE, both SeqNum 80078 of the default
    group. The mismatch is found from the watchdog lines; one rank each way is a tie, so both sides are
    listed below the naming bar and the summary names neither alone."""
    from parsers import knowledge
    from forensics.report.words import analyze
    from parsers.judges.logs import correlate

    with tempfile.TemporaryDirectory() as tmp:
        ev = _evidence("nccl-1409", tmp)
        found = correlate(ev)
        result = analyze(Path(tmp), knowledge.load(use_env=False))
    sides = sorted((s.rank, s.reason_class, round(s.confidence, 2)) for s in found.suspects)
    assert sides == [(3, ReasonClass.MISMATCH, 0.45), (7, ReasonClass.MISMATCH, 0.45)]
    assert result.verdict.culprit is None
    summary = result.verdict.text
    # one tie, both sides
    assert len(result.verdict.leads) == 1 and says(result.verdict.leads, "rank 3", "rank 7", "0.45")
    assert "rank 3 called allreduce()" in summary and "rank 7 called broadcast()" in summary


def test_a_minority_that_unseen_ranks_could_outnumber_is_only_a_lead():
    """pytorch #20630: ranks 1-2 ALLREDUCE, rank 3 BROADCAST at SeqNum 4084, rank 0 silent and the
    job's size unstated: rank 3 is a lead, not a culprit (rank 0 could make it two against two)."""
    from parsers import knowledge
    from forensics.report.words import analyze

    with tempfile.TemporaryDirectory() as tmp:
        shutil.copy(CORPUS / "pytorch-20630.log", tmp)
        v = analyze(Path(tmp), knowledge.load(use_env=False)).verdict
    assert v.culprit is None
    assert [(s.rank, str(s.reason_class), s.confidence) for s in v.suspects] == [(3, "mismatch", 0.45)]
    assert says(v.leads, "rank 3", "not seen")  # the lead says why it is one: ranks not seen


def test_gloo_dump_with_one_unnamed_group_gives_the_jobs_size():
    """A gloo Flight Recorder dump (torch 2.13, our capture) names its one group '' with ranks [0, 1, 2, 3]:
    that is the default group, so the job's size is known and a 3-against-1 mismatch is settled."""
    from hf_testpaths import FIXTURES
    from parsers.gather.evidence import load_directory
    from parsers.judges.logs import correlate
    from parsers.model.events import CommMember

    folder = FIXTURES / "gloo" / "mismatch"
    ev = load_directory(folder)
    sizes = {e.nranks for a in ev.artifacts if a.kind == "fr-dump" and a.parsed
             for e in a.parsed.events if isinstance(e, CommMember) and e.comm == "pg:0"}
    assert sizes == {4}
    c = correlate(ev).culprit
    assert c is not None and (c.rank, str(c.reason_class)) == (1, "mismatch") and c.confidence >= 0.6


def test_deepspeed_launcher_exit_is_said_in_its_own_terms():
    """DeepSpeedExamples #626: the launcher kills two workers, then reports the one started with
    --local_rank=1 ended with return code -11: the summary says SIGSEGV of local_rank 1, not 'Killing subprocess'."""
    from parsers import knowledge
    from forensics.report.words import analyze

    with tempfile.TemporaryDirectory() as tmp:
        shutil.copy(CORPUS / "deepspeedex-626.log", tmp)
        v = analyze(Path(tmp), knowledge.load(use_env=False)).verdict
    assert v.culprit is None
    assert says(observed(v, "first-error"), "launcher-exit", "local_rank 1", "SIGSEGV")
    assert "Killing subprocess" not in v.text


def test_errors_at_one_time_from_two_ranks_make_no_first_error_lead(tmp_path):
    """MiniGPT-4 #237: torchelastic's report gives ranks 0 and 1 the same second (2023-05-19_16:39:58);
    no rank is the first at that precision, so none is a lead and the summary says the tie."""
    from forensics.report.words import analyze

    shutil.copy(CORPUS / "minigpt4-237.log", tmp_path)
    verdict = analyze(tmp_path).verdict
    assert verdict.culprit is None and not verdict.suspects
    assert says(observed(verdict, "first-error"), "05-19 16:39:58", "ranks 0-1"), verdict.text


def test_a_torchelastic_entry_is_said_in_words(tmp_path):
    """PyTorch #148976: the 'Failures:' entry as the summary says it, not as a dict."""
    from forensics.report.words import analyze

    shutil.copy(CORPUS / "pytorch-148976.log", tmp_path)
    verdict = analyze(tmp_path).verdict
    entry = observed(verdict, "first-error")
    assert says(entry, "child-failure", "rank 1", "local_rank 1", "exitcode 1", "pid 340055", "lenovo",
                "2025-03-11_18:33:20"), entry
    assert not says(entry, "{")  # not as a dict


def test_ib_errors_pasted_from_three_hosts_go_to_each_lines_host():
    """NCCL #928: one paste of IB error-4 WARNs from H100-2, H100-1 and H100-5: each host is suspect
    for its own line; none of it lands on an 'unknown-host' (the file names no single host)."""
    from parsers.judges.hosts import host_reports
    from parsers import knowledge
    with tempfile.TemporaryDirectory() as tmp:
        reports = host_reports(_evidence("nccl-928", tmp), knowledge.load(use_env=False))
    suspect = {r.host: [g.first.line_no for g in r.reasons] for r in reports if r.status == "suspect"}
    assert suspect == {"H100-1": [6], "H100-2": [1], "H100-5": [11]}
    assert "unknown-host" not in {r.host for r in reports}


def test_first_timed_error_without_a_rank_says_who_and_what():
    """NCCL #1905: three timestamped WARNs of one process, no rank printed: the summary's first error
    names pid, host and device and the message, not a bare kind."""
    from verdicts import judge
    lines = judge("nccl-1905").text.splitlines()
    assert says(lines, "first error", "nccl-warn", "pid 238", "h100-28", "device 0", "fatal error"), lines


def test_ras_ranks_listed_under_two_count_groups_are_the_group_of_their_number():
    """NCCL #1911 (2.26.2): '30 ranks ... operation 640', '2 ranks ... operation 641', then two rank lines
    without a count: they are the two at 641 (the reporter: 'not stragglers'), so ahead, blamed for nothing,
    and the summary says so instead of 'no error'."""
    from verdicts import judge
    (parsed,) = load(CORPUS / "nccl-1911.log")
    assert [(f.kind, f.comm_rank, f.op_count) for f in parsed.events] == [("ahead", 12, 641), ("ahead", 13, 641)]
    j = judge("nccl-1911")
    assert j.culprit == "none"
    assert says(j.text.splitlines(), "ranks 12, 13", "ahead", "allgather", "641")
    assert "no error" not in j.text


def test_a_rank_that_completed_past_another_members_wait_is_said(tmp_path):
    """Accelerate #3250: rank 0 waits in work 122 of the default group, rank 1 completed up to 125: said as
    call sequences that no longer line up, with no culprit (which side is odd is not in the lines)."""
    from forensics.report.words import analyze

    shutil.copy(CORPUS / "accelerate-3250.log", tmp_path)
    verdict = analyze(tmp_path).verdict
    assert verdict.culprit is None
    assert says(observed(verdict, "completed-past"), "default group", "rank 1", "125", "rank 0", "122"), verdict.text


def test_one_completion_past_a_wait_or_lines_of_other_runs_say_no_split(tmp_path):
    """MOTIP #52: rank 0 completed 93201, the one rank 2 waits in (a peer dying inside a collective leaves
    members apart by one); tests/fixtures/host/ranklogs: rank 0's wait and rank 2's completions are months
    apart (a file of several jobs' lines). Neither is a split."""
    from forensics.report.words import analyze
    from parsers.judges.observations import completed_past

    shutil.copy(CORPUS / "motip-52.log", tmp_path)
    assert completed_past(analyze(tmp_path).evidence) == []
    assert completed_past(analyze(CORPUS.parent / "host" / "ranklogs").evidence) == []


def _silent_said(stem: str) -> list:
    """The coverage observations that say ranks printed nothing (typed: a CoverageFact with silent ranks)."""
    from parsers.judges.observations import observe

    with tempfile.TemporaryDirectory() as tmp:
        return [o for o in observe(_evidence(stem, tmp)) if o.kind == "coverage" and o.facts.silent]


def _silent(stem: str) -> tuple[tuple[list[int], int] | None, list[str]]:
    """The silent ranks below the highest waiting one (typed), and the coverage observations that say them."""
    from parsers.judges.logs.silence import silent_below
    from parsers.judges.observations import observe

    with tempfile.TemporaryDirectory() as tmp:
        ev = _evidence(stem, tmp)
        return silent_below(ev), [worded(o) for o in observe(ev) if o.kind == "coverage"]


def test_ranks_below_the_highest_waiting_rank_that_print_nothing_are_said_silent():
    """Ultra-Fast-Lane-Detection-v2 #119: ranks 1-3 time out after 'Evaluating the results...', rank 0 prints
    nothing; mmdetection #11096: ranks 2-4 and 6 time out in a broadcast, ranks 0-1 and 5 print nothing."""
    silent, said = _silent("ufld-v2-119")
    assert silent == ([0], 3) and says(said, "rank 0", "rank 3"), said
    silent, said = _silent("mmdet-11096")
    assert silent == ([0, 1, 5], 6) and says(said, "ranks 0-1,5", "rank 6"), said


def test_one_waiting_rank_says_nothing_of_silent_ranks():
    """FSDP2 #26 (vlm-training): rank 9 alone times out; an excerpt of one rank says nothing of ranks 0-8."""
    assert _silent_said("vlm-training-26") == []


def test_untagged_lines_of_several_groups_say_nothing_of_silent_ranks():
    """PyTorch #118369: torch 1.x lines carry no PG tag, and rank 0 times out at SeqNums 96117-96125 while
    rank 7 does at 64088: several groups' lines, whose '[Rank N]' need not be global ranks."""
    assert _silent_said("pytorch-118369") == []


def test_silent_ranks_are_said_inside_the_coverage_sentence_when_there_is_one():
    """PyTorch #141069: the lines are ranks 1-3's and the job's size is not stated: one sentence says both
    whose lines these are and that rank 0, below them, printed none."""
    silent, said = _silent("pytorch-141069")

    # one sentence says both
    assert silent == ([0], 3) and len(said) == 1 and says(said, "ranks 1-3", "rank 0", "rank 3"), said



def test_a_timeout_set_under_a_second_is_said_as_the_cause_and_names_no_rank(tmp_path):
    """instructlab/training#520: Timeout(ms)=1, ran for 90 milliseconds (set to 1 ms on purpose): the cause is
    the setting; accelerate#3250's 600000 ms timeouts say nothing of the kind."""
    from forensics.report.words import analyze
    from parsers.judges.logs.short_timeout import too_short

    shutil.copy(CORPUS / "instructlab-520.log", tmp_path)
    verdict = analyze(tmp_path).verdict
    assert verdict.culprit is None and not [s for s in verdict.suspects if s.confidence >= 0.5]
    # the setting leads the summary, as the cause: a fact of the verdict's first line, not of a lower one
    assert observed(verdict, "setting") and says([verdict.summary], "1 ms", "rank 3"), verdict.text
    assert verdict.summary.startswith("no culprit named")  # wording is the behaviour: the 'no culprit' rule's words
    with tempfile.TemporaryDirectory() as tmp:
        assert too_short(_evidence("accelerate-3250", tmp)) is None


def test_a_host_no_line_names_is_said_as_such(tmp_path):
    """Accelerate #1192: the ECC error's host is named by no line: the summary says 'the host of these lines',
    not a made-up name."""
    from forensics.report.words import analyze

    shutil.copy(CORPUS / "accelerate-1192.log", tmp_path)
    verdict = analyze(tmp_path).verdict
    summary = verdict.text
    # wording is the behaviour: the words that stand for a host no line names (never a made-up name)
    assert says(observed(verdict, "host"), "the host of these lines",
                "exclude") and "unknown-host" not in summary, summary

