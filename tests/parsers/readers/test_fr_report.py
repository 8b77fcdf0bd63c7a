"""The Flight Recorder analyzer's text report: read from real pasted copies, judged without overclaim.

Lines come from the corpus excerpts (tests/fixtures/realworld, each with its thread) and from
pytorch/pytorch#140563, whose stored copy cuts the `error msg` line mid-entry.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from forensics.report.words import facts as present
from parsers.judges.logs import fr_report as judge
from parsers.model.events import ErrorEvent, FrCulprit, FrFinding, Origin
from parsers.readers import fr_report, rank_log, textline
from parsers.gather.registry import recognise
from facts import says

CORPUS = Path(__file__).resolve().parents[2] / "fixtures" / "realworld"
#: pytorch/pytorch#140563 (2024-11-16 comment), as the stored copy of the thread ends
CUT_ERROR_MSG = ("error msg: Culprit rank 22; Error type: SIZE_OR_SYNTAX_MISMATCH, Expected input sizes: '[[1025]]' "
                 "does not match found input sizes: '[[262144]]', Culprit rank 110; Error type: "
                 "SIZE_OR_SYNTAX_MISMATCH, "
                 "Expected input sizes: '[[1025]]' does not match found")


def _events(stem: str) -> list[ErrorEvent]:
    parsed = rank_log.parse_lines((CORPUS / f"{stem}.log").read_text().splitlines(True), f"{stem}.log")
    assert parsed.unknown_lines <= 1 and not parsed.unread, (parsed.unknown_lines, parsed.unread)
    return [e for e in parsed.events if isinstance(e, ErrorEvent) and e.kind == "fr-analysis"]


def _suspects(events: list[ErrorEvent]) -> dict[int, tuple[str, float]]:
    got: dict[int, tuple[str, float]] = {}

    class Acc:
        def __init__(self, rank):
            self.rank = rank

        def offer(self, cls, reason, conf, evidence):
            got[self.rank] = (str(cls), conf)
    judge.offer_suspects([(None, e) for e in events], Acc)
    return got


def test_sequence_number_header_and_fields():
    [e] = _events("pytorch-140969")
    assert (e.seq, e.op, e.comm) == (31117, "allreduce", "pg:0")
    assert type(e.data) is FrFinding
    assert e.data.missing_ranks == [3, 4, 5, 6, 7] and e.data.expected_ranks == list(range(8))
    assert e.data.record_id == 31116 and e.data.world_size == 8 and e.data.state == "scheduled"
    assert len(e.data.frames) == 3


def test_entry_header_with_a_count_of_expected_ranks_in_an_indented_block():
    [e] = _events("tutorials-3163")
    assert (e.seq, e.data.record_id, e.data.expected_count, e.data.missing_ranks) == (5, 4, 2, [1])


def test_two_findings_and_error_msg():
    first, second = _events("pytorch-151666")
    assert first.seq == 1487 and first.data.culprits == [FrCulprit(1, "COLLECTIVE_STATE_MISMATCH")]
    assert first.data.culprits_complete and second.seq == 1488 and second.data.culprits is None


def test_a_cut_culprit_list_is_marked_incomplete():
    culprits, complete = fr_report.parse_culprits(CUT_ERROR_MSG.split(": ", 1)[1])
    assert [c.rank for c in culprits] == [22, 110] and not complete


def test_an_orphan_field_line_is_reported_not_dropped():
    assert fr_report.FrReportBlock().feed(CUT_ERROR_MSG, Origin()) == (False, [])
    assert textline.looks_known(CUT_ERROR_MSG)
    parsed = rank_log.parse_lines([CUT_ERROR_MSG + "\n"])
    assert [t for _, t in parsed.unread] == [CUT_ERROR_MSG]


def test_rank_sets_are_bounded():
    huge = "{" + ", ".join(str(i) for i in range(fr_report.MAX_RANKS * 2)) + "}"
    assert len(fr_report.parse_ranks(huge)) == fr_report.MAX_RANKS
    assert fr_report.parse_ranks("{1, x}") is None and fr_report.parse_ranks("set()") == []


def test_a_file_of_only_a_report_is_its_own_kind():
    for stem in ("pytorch-140969", "pytorch-140563", "tutorials-3163", "pytorch-151666"):
        head = (CORPUS / f"{stem}.log").read_bytes()
        assert recognise(f"{stem}.log", head, True).name == "fr-report", stem
    other = (CORPUS / "nccl-1409.log").read_bytes()
    assert recognise("nccl-1409.log", other, True).name != "fr-report"


def test_minority_missing_is_named_majority_is_not():
    assert _suspects(_events("pytorch-140969")) == {}  # 5 of 8 missing
    assert _suspects(_events("tutorials-3163")) == {1: ("fr-missing", judge.PAIR_CONFIDENCE)}
    [e] = _events("pytorch-140969")
    e.data = replace(e.data, missing_ranks=[3])  # one of eight
    assert _suspects([e]) == {3: ("fr-missing", 0.6)}
    e.data = replace(e.data, no_dump_ranks=[3])  # the analyzer had no dump from it: its absence says nothing
    assert _suspects([e]) == {}


def test_culprit_lists_name_only_a_small_complete_minority_of_call_mismatches():
    first, _ = _events("pytorch-151666")
    assert _suspects([first]) == {}  # 1 of 2, and a state mismatch
    first.data = replace(first.data, world_size=8)
    assert _suspects([first]) == {}  # a state mismatch is never a lead
    first.data = replace(first.data, culprits=[FrCulprit(1, "SIZE_OR_SYNTAX_MISMATCH")])
    assert _suspects([first]) == {1: ("fr-culprit", 0.5)}
    first.data = replace(first.data, culprits_complete=False)
    assert _suspects([first]) == {}


def test_summary_says_what_the_report_shows():
    [text] = map(present.fr_report, judge.facts(_events("pytorch-140969")))
    assert "ranks 3-7 of 8" in text and "31117" in text and "default_pg" in text and "not a minority" in text
    first_text, _ = map(present.fr_report, judge.facts(_events("pytorch-151666")))
    assert says([first_text], "rank 1 of 2", "odd one"), first_text


def _verdict(tmp_path, name: str):
    import shutil

    from hf_testpaths import FIXTURES
    from parsers import knowledge
    from forensics.report.words import analyze

    shutil.copy(FIXTURES / "fr_trace" / f"{name}.txt", tmp_path)
    return analyze(tmp_path, knowledge.load(use_env=False)).verdict


def test_our_capture_the_missing_minority_rank_is_named(tmp_path):
    """torch 2.13's analyzer on our NCCL 'sleep' dumps: rank 5 of 8 never recorded all_reduce 11 (truth: rank 5)."""
    v = _verdict(tmp_path, "sleep")
    assert (v.culprit.rank, str(v.culprit.reason_class)) == (5, "fr-missing")


def test_our_capture_a_chain_ends_at_the_rank_that_waits_nowhere(tmp_path):
    """'chain': ranks 1, 2 and 3 are each missing from a two-rank group (pg_A, pg_B, pg_C), but ranks 1 and 2
    wait in pg_B and pg_C themselves; rank 3 waits nowhere (truth: rank 3 sleeps)."""
    v = _verdict(tmp_path, "chain")
    assert v.culprit is not None and v.culprit.rank == 3
    assert [s.rank for s in v.suspects] == [3]


def test_our_capture_without_the_culprits_dump_names_nobody_and_says_why(tmp_path):
    """'mismatch' and 'sigstop': the culprit left no dump, and the analyzer says it cannot decide."""
    for name, rank in (("mismatch", 1), ("sigstop", 3)):
        folder = tmp_path / name
        folder.mkdir()
        v = _verdict(folder, name)
        assert v.culprit is None
        lines = v.text.splitlines()
        assert says(lines, f"rank {rank}", "11 collective(s)"), v.text  # whose dump is missing, what stayed open
        assert says(lines, "stopped checking", "default_pg"), v.text


def test_an_fr_analysis_event_made_from_a_dict_gets_typed_data_and_a_stray_key_is_refused():
    """Data given as a dict (a caller's, or a digest's from before FrFinding had a tag) is typed by the event, so
    the judge never meets a dict; a key the analyzer's finding has no field for is refused, as an unknown kind is."""
    culprit = {"rank": 2, "error_type": "SIZE_OR_SYNTAX_MISMATCH"}
    e = ErrorEvent("fr-analysis", "m", Origin(),
                   data={"finding": "not-joined", "missing_ranks": [1], "culprits": [culprit]})
    assert e.data == FrFinding("not-joined", missing_ranks=[1], culprits=[FrCulprit(2, "SIZE_OR_SYNTAX_MISMATCH")])
    assert e.data.get("missing_ranks") == [1] and e.data.get("world_size") is None and e.data.get("nope", 3) == 3
    for bad in ({"finding": "x", "forged": 1}, {"missing_ranks": [1]}, {"finding": "x", "culprits": [{"rank": 1}]}):
        with pytest.raises(ValueError, match="FrFinding"):
            ErrorEvent("fr-analysis", "m", Origin(), data=bad)
