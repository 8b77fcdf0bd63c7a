"""Recorder files captured on the GPU machine (real NCCL 2.28.9, 8 ranks as 8 hosts on
one H200, one rank SIGSTOPped mid-stream of large all_reduces) by
nccl_patches/device/sigstop_scenario.py, with the truth it recorded.

Skipped until those fixtures are committed under tests/fixtures/recorder/.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from parsers.readers.recorder import read_recorder_file
from parsers.judges.recorder import analyse, stalled_ranks

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "recorder"
SCENARIOS = sorted(p for p in FIXTURES.glob("*") if (p / "truth.json").is_file()) if FIXTURES.is_dir() else []


def test_the_device_scenarios_are_there():
    """The parametrized test below is skipped, not failed, on an empty list: a moved folder must fail here."""
    assert [p.name for p in SCENARIOS] == ["sigstop8"], SCENARIOS


@pytest.mark.parametrize("scenario", SCENARIOS, ids=lambda p: p.name)
def test_the_stopped_rank_is_named_from_real_nccl_state(scenario: Path):
    truth = json.loads((scenario / "truth.json").read_text())
    states = [read_recorder_file(scenario / name, observed_ns=ns) for name, ns in truth["observed_ns"].items()]
    assert len(states) >= truth["ranks"] - 1
    assert all(s.writer == "profiler-plugin" for s in states)
    stalls = analyse(states)
    assert any(stall.edges for stall in stalls)  # real proxy ops waiting on peers
    top = stalled_ranks(states)[0]
    assert top.pid == truth["victim_pid"]
    assert top.reason_class in ("entered-then-frozen", "frozen")
