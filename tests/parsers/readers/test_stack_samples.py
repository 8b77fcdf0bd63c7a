"""Stack samples (collect --samples): the reader, the registry and the activity judge, on real files.

Fixtures: tests/fixtures/straggler/README.md (a real 4-rank gloo job; rank 2 sleeps 0.3 s in
slow_data_step before every all_reduce; py-spy 0.4.3 samples taken by our collector).
"""

from __future__ import annotations

import json
import shutil

import pytest

from hf_testpaths import FIXTURES
from parsers.gather import registry
from parsers.gather.evidence import load_path
from parsers.judges.activity import activity_facts, describe_activity, is_moving, rank_activities
from parsers.model.samples import IDLE, IN_COLLECTIVE
from parsers.readers.pyspy_samples import MAX_SAMPLES, parse_samples_data

HERE = FIXTURES / "straggler" / "straggle"


def _load(name: str) -> dict:
    return json.loads((HERE / name).read_text())


def test_the_stragglers_samples_sit_in_its_slow_step_off_the_cpu():
    s = parse_samples_data(_load("pyspy-samples-rank2.json"))
    assert s.taken == 12 and s.failed == 0 and s.span_s > 0.5
    top = s.where[0]
    assert top.label.startswith("slow_data_step (armed_job.py:") and top.idle == top.count
    assert s.state_share(IN_COLLECTIVE) == 0.0 and s.state_share(IDLE) == 1.0  # it never waits: the others wait for it


def test_a_waiting_rank_spends_most_samples_in_all_reduce():
    s = parse_samples_data(_load("pyspy-samples-rank0.json"))
    assert s.where[0].label == "all_reduce" and s.state_share(IN_COLLECTIVE) >= 0.5
    assert [o.label for o in s.ops] == ["all_reduce"]


def test_activity_line_names_the_place_the_share_and_the_file():
    s = parse_samples_data(_load("pyspy-samples-rank2.json"))
    line = describe_activity(s, "hosts/vm/rank2-pid1/pyspy-samples.json")
    assert line.startswith(f"samples: {s.where[0].share:.0%} in slow_data_step (armed_job.py:")
    assert "[off CPU]" in line and "12 py-spy samples over" in line
    assert line.endswith("hosts/vm/rank2-pid1/pyspy-samples.json)")
    waiting = describe_activity(parse_samples_data(_load("pyspy-samples-rank0.json")))
    assert "% in all_reduce" in waiting and "all_reduce [" not in waiting  # a wait gets no CPU note
    assert is_moving(s) is True and activity_facts(s)["moving"] is True


def test_one_place_in_every_sample_is_not_motion_and_few_samples_tell_nothing():
    data = _load("pyspy-samples-rank0.json")
    main = [t for x in data["samples"] for t in x["threads"] if t["os_thread_id"] == data["pid"]]
    data["samples"] = [x for x, t in zip(data["samples"], main) if any(f["name"] == "all_reduce" for f in t["frames"])]
    assert len(data["samples"]) >= 5
    assert is_moving(parse_samples_data(data)) is False
    data["samples"] = data["samples"][:2]
    assert is_moving(parse_samples_data(data)) is None
    assert "too few samples" in describe_activity(parse_samples_data(data))


def test_registry_knows_the_file_by_name_and_by_content(tmp_path):
    raw = (HERE / "pyspy-samples-rank2.json").read_bytes()
    assert registry.recognise("pyspy-samples.json", raw[: registry.HEAD_BYTES], True).name == "pyspy-samples"
    # not pyspy-json
    assert registry.recognise("whatever.json", raw[: registry.HEAD_BYTES], True).name == "pyspy-samples"
    folder = tmp_path / "loose"
    folder.mkdir()
    shutil.copy(HERE / "pyspy-samples-rank2.json", folder / "pyspy-samples.json")
    ev = load_path(folder)
    rank = next(r for r in ev.ranks if r.samples is not None)
    assert rank.pyspy == []  # samples never pose as the single stack dump
    assert not ev.problems


def test_rank_activities_from_evidence_keys_by_rank(tmp_path):
    folder = tmp_path / "b"
    for name, rank in (("pyspy-samples-rank2.json", 2), ("pyspy-samples-rank0.json", 0)):
        d = folder / f"rank{rank}"
        d.mkdir(parents=True)
        shutil.copy(HERE / name, d / "pyspy-samples.json")
        (d / "environ.json").write_text(json.dumps({"RANK": str(rank), "WORLD_SIZE": "4", "PATH": "/usr/bin"}))
    ev = load_path(folder)
    got = rank_activities(ev)
    assert sorted(got) == [0, 2]
    assert "slow_data_step" in got[2]["text"] and got[2]["file"].endswith("pyspy-samples.json")


@pytest.mark.parametrize("bad", [[], {"format": "other"}, {"format": "hang-forensics-stack-samples", "version": 99},
                                 {"format": "hang-forensics-stack-samples", "version": "1"}])
def test_other_or_newer_documents_are_refused(bad):
    with pytest.raises(ValueError):
        parse_samples_data(bad)


def test_hostile_samples_are_bounded_and_counted_not_trusted():
    data = _load("pyspy-samples-rank2.json")
    one = data["samples"][0]
    data["samples"] = [one] * (MAX_SAMPLES + 500) + ["junk", {"threads": "x"}]
    data["failures"] = [{"t": 1, "error": "x" * 10_000}]
    s = parse_samples_data(data)
    assert s.taken == MAX_SAMPLES and s.failed == 1  # the junk lies past the cap; the failure is counted
    assert len(s.errors[0]) <= 300
    data["samples"] = ["junk", {"threads": "x"}, one]
    assert parse_samples_data(data).failed == 3 and parse_samples_data(data).taken == 1
