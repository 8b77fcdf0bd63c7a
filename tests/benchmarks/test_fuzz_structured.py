"""A short seeded run of the structure-aware fuzzer (benchmarks/fuzz_structured.py): real fixtures mutated by
their structure, each through analyze, --json and report in a forked child under 1 GiB and 5 s.
No uncaught exception, no run over 5 s, no RSS over 1 GiB (the long run's figures are in benchmarks/README.md)."""

from __future__ import annotations

import json

import pytest

from benchmarks import fuzz_structured

pytestmark = pytest.mark.integration  # a sweep: 200 fuzzed inputs, each in a forked child process


def test_seeded_inputs_give_answers_not_failures(tmp_path):
    state = tmp_path / "state.json"
    result = fuzz_structured.main(["--inputs", "200", "--seed", "31", "--state", str(state), "--keep",
                                   str(tmp_path / "kept")])
    ran = sum(result["counts"].values())
    assert ran == 200
    assert result["failures"] == [], json.dumps(result["failures"][:3], indent=1)[:4000]
    assert json.loads(state.read_text())["next"] == 200  # resumable: the next run starts there


def test_inputs_depend_only_on_seed_and_index(tmp_path):
    seeds = fuzz_structured.seed_files()
    assert len(seeds) > 100
    for index in (0, 7, 123):
        a, b = tmp_path / f"a{index}", tmp_path / f"b{index}"
        assert fuzz_structured.make_input(seeds, 5, index, a) == fuzz_structured.make_input(seeds, 5, index, b)
        assert sorted(p.name for p in a.iterdir()) == sorted(p.name for p in b.iterdir())
        assert all((a / p.name).read_bytes() == (b / p.name).read_bytes() for p in a.iterdir())
