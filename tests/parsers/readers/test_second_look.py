"""The second-look reader and the progress judge on real captures (tests/fixtures/second_look/README.md)."""

from __future__ import annotations

import json

import pytest

from hf_testpaths import FIXTURES
from parsers.gather.evidence import load_path
from parsers.judges.progress import hang_from_time, judge_second_look
from parsers.readers.second_look import parse_second_look_data
from facts import says

CASES = FIXTURES / "second_look"


def _ranks(case: str):
    return sorted((r for r in load_path(CASES / case).ranks), key=lambda r: r.rank)


def test_a_hung_gloo_job_made_no_progress_between_the_looks():
    ranks = _ranks("hung-gloo-sleep")
    assert [r.rank for r in ranks] == [0, 1] and all(r.second_look is not None for r in ranks)
    for r in ranks:
        sl = r.second_look
        assert sl.comparable and sl.changes == [], sl.changes
        assert 2.9 <= sl.waited_s <= 6.0 and sl.requested_s == 3.0
        assert len(sl.first.stacks) == 3 and sl.second.io_calls == sl.first.io_calls
    progress = judge_second_look(ranks)
    assert progress.decided and not progress.running and progress.stalled_ranks == [0, 1]
    hang, basis, hung = hang_from_time(progress, False, set())
    assert hang == "hang" and hung == {0, 1}
    assert says([basis], "two looks", "3.0 s", "the first at", "UTC"), basis  # no collection time given: the clock


@pytest.mark.parametrize("after_s", [0.2, 1.4, 32.0])
def test_the_looks_are_dated_from_the_one_collection_time(after_s: float):
    """Issue 41 item 4: the verdict says one collection time (the manifest's, on its 'times:' line); the first
    look is an offset from it (1 s later without --gdb, 32 s with it), never a second clock time beside it."""
    ranks = _ranks("hung-gloo-sleep")
    first = min(r.second_look.first.t for r in ranks)
    text = judge_second_look(ranks, first - after_s).describe()
    assert "UTC" not in text, text
    said = ("the first at the collection time" if after_s < 0.5
            else f"the first {after_s:.0f} s after the collection time")
    assert said in text, text  # wording is the behaviour: the offset is what the reader sees


def test_a_stopped_rank_and_its_waiting_peers_are_the_hung_scope():
    ranks = _ranks("hung-gloo-stopped")
    assert ranks[1].second_look.first.state == "T" == ranks[1].second_look.second.state
    progress = judge_second_look(ranks)
    assert not progress.running and progress.stalled_ranks == [0, 1, 2]


def test_a_training_job_whose_stacks_did_not_move_still_shows_progress():
    ranks = _ranks("running-gloo")
    sl0 = ranks[0].second_look
    assert len(set(sl0.first.stacks) | set(sl0.second.stacks)) == 1  # rank 0 was caught in the same sleep every time
    for r in ranks:
        assert any("read/write system calls grew" in c for c in r.second_look.changes), r.second_look.changes
    progress = judge_second_look(ranks)
    assert progress.decided and progress.running and progress.stalled_ranks == []
    assert hang_from_time(progress, False, set())[0] == "progress"


def test_only_some_ranks_moved_names_the_still_ones_as_the_hung_scope():
    moving = _ranks("running-gloo")[0]
    still = _ranks("hung-gloo-sleep")[1]
    progress = judge_second_look([moving, still])
    assert not progress.running and progress.stalled_ranks == [1]
    assert "rank 0 changed" in progress.describe()


def test_without_comparable_looks_nothing_is_decided():
    data = json.loads(next((CASES / "hung-gloo-sleep").glob("rank1-*/second-look.json")).read_text())
    data["looks"] = data["looks"][:1]  # cut short before look 2
    sl = parse_second_look_data(data)
    assert sl.second is None and not sl.comparable and sl.changes == []

    class R:
        rank, second_look = 1, sl
    assert not judge_second_look([R()]).decided


@pytest.mark.parametrize("bad", [
    {"format": "hang-forensics-second-look", "version": 99, "looks": []},
    {"format": "other"},
    {"format": "hang-forensics-second-look", "version": 1, "looks": [{"t": "x"}, 5]},
])
def test_hostile_files_are_refused_clearly(bad):
    with pytest.raises(ValueError):
        parse_second_look_data(bad)


def test_hostile_fields_are_dropped_not_trusted():
    data = json.loads(next((CASES / "running-gloo").glob("rank0-*/second-look.json")).read_text())
    data["looks"][1]["proc"]["io"] = {"syscr": "lots", "syscw": -5}
    data["looks"][1]["stacks"] = [{"threads": "no"}, 7]
    data["looks"][1]["nccl_log"] = {"size": True, "new_op_lines": 10 ** 30}
    sl = parse_second_look_data(data)
    assert sl.second.io_calls is None and sl.second.stacks == () and sl.second.new_op_lines == 0
    assert not sl.comparable or sl.changes == [] or all("stack" in c for c in sl.changes)


def test_the_file_is_a_registry_kind_recognised_by_name_and_by_content():
    from parsers.gather import registry

    raw = next((CASES / "hung-gloo-sleep").glob("rank0-*/second-look.json")).read_bytes()
    assert registry.recognise("second-look.json", raw[: registry.HEAD_BYTES], True).name == "second-look"
    assert registry.recognise("whatever.json", raw[: registry.HEAD_BYTES], True).name == "second-look"
    assert registry.kind("second-look").file_name() == "second-look.json"
    assert registry.kind("second-look").collector == "second-look"
