"""The fleet fuzzer runs (issue 40): 66 seeded inputs over a 1,024-rank bundle's digests and gateway answers,
including one whole analysis (input 63), with no failure."""

from __future__ import annotations

import pytest

from benchmarks import fuzz_fleet

pytestmark = pytest.mark.integration  # a sweep: a 1,024-rank bundle built, 66 inputs each in a forked child


def test_fleet_inputs_run_without_failure(tmp_path):
    state = fuzz_fleet.main(["--inputs", "66", "--seed", "40", "--state", str(tmp_path / "state.json")])
    assert state["done"] == 66 and not state["failures"], state["failures"][:3]
    assert state["counts"].get("ok") == 66
