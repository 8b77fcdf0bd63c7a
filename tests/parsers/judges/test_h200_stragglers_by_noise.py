"""Issue 26 item 3: stragglers by the job's own noise, on the real H200 captures (NCCL 2.28.9, 8 ranks).

Each source is judged on its own (parsers.judges.stragglers.judge_ops): the recorder's waits (4 ms
coarse clock in h200_issue15, ns clock in h200_issue15_ns) and the NCCL COLL log's enter times.
The truth is the scenario driver's truth.json (scripts/device/live_scenarios.py), not the analysis.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from parsers import knowledge
from parsers.input.archive import extract_into
from parsers.gather.evidence import load
from parsers.judges.recorder import recorder_hosts
from parsers.judges.slowness import _hosts
from parsers.judges.stragglers import nccl_log_ops, judge_ops, recorder_ops
from parsers.gather.source import open_source

pytestmark = pytest.mark.integration  # it starts real processes (it was under tests/integration)

FIX = Path(__file__).resolve().parents[2] / "fixtures" / "device"
KB = knowledge.load(use_env=False)
RUNS = ("h200_issue15", "h200_issue15_ns", "h200_links", "h200_run7")


@pytest.fixture(scope="module")
def captures(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("h200_noise")
    for name in RUNS:
        extract_into(FIX / f"{name}.tar.gz", root)
    return root


def _rounds(case: Path) -> list[Path]:
    return sorted(p for p in case.iterdir() if p.is_dir() and p.name.startswith("round") and "." not in p.name)


def _judged(round_dir: Path) -> dict:
    with open_source(round_dir) as src:
        ev = load(src, KB.line_filter)
    return {"recorder": judge_ops(recorder_ops(ev.recorder), recorder_hosts(ev.recorder)),
            "coll": judge_ops(nccl_log_ops(ev.artifacts), _hosts(ev))}


def test_the_5ms_straggler_is_named_with_its_figure(captures: Path):
    """slow5 of the ns run: rank 6 sleeps 5 ms before every all_reduce. Named in every round from the
    recorder's waits and from the COLL log's enter times alone (the old 8 ms enter floor named nobody),
    with its mean lateness, the job's jitter, the ops and its share of ops last."""
    case = captures / "h200_issue15_ns" / "slow5"
    truth = json.loads((case / "truth.json").read_text())
    assert truth["slow_ranks"] == [6] and truth["slow_by_ms_per_step"] == 5
    for r in _rounds(case):
        for source, found in _judged(r).items():
            assert found.late == [6], (r.name, source, found.to_dict())
            assert 4.0 <= found.excess_ms(6) <= 6.0 and found.jitter_ms < 1.5 and found.ops >= 50
            assert found.last_share[6] >= 0.8
            text = found.describe()
            host = "node06" if source == "recorder" else "vm"  # the COLL log's host is the machine's name
            assert text.startswith(f"rank 6 ({host}) ") and f"{found.last_share[6]:.0%}" in text, text
            assert f"{found.ops} collectives" in text and "jitter" in text, text


def test_below_a_tick_from_the_coarse_clock(captures: Path):
    """The first run's recorder stamped with the 4 ms coarse clock: the healthy ranks' waits never differ by
    a tick, so the job's jitter is below it; rank 6's 5 ms shows in its mean (3.4-4.2 ms) and in being last
    at 60% of ops, and it is named with that said."""
    for r in _rounds(captures / "h200_issue15" / "slow5"):
        found = _judged(r)["recorder"]
        assert found.late == [6] and found.resolution_ms == 4.0 and found.last_share[6] >= 0.5
        assert 3.0 <= found.excess_ms(6) <= 6.0
        assert "4 ms tick" in found.describe() and "jitter" in found.describe(), found.describe()


@pytest.mark.parametrize("run,case",
                         [("h200_issue15", "healthy"), ("h200_issue15_ns", "healthy"), ("h200_links", "healthy"),
                                      ("h200_links", "slowlink"), ("h200_links", "slownet"), ("h200_run7", "slowtree")])
def test_healthy_ranks_name_nobody(captures: Path, run: str, case: str):
    """Jobs with no slow rank (healthy; a slow link or a slow network delays every rank alike), every round,
    both sources: nobody named, and no rank comes near the bar (the largest reached 1.0x of 3x on enter times)."""
    for r in _rounds(captures / run / case):
        for source, found in _judged(r).items():
            if found.ops < 8:
                continue
            assert found.late == [], (run, case, r.name, source, found.to_dict())
            worst = max(found.excess_ms(k) for k in found.mean_ms)
            assert worst < 0.5 * found.threshold_ms, (run, case, r.name, source, worst, found.threshold_ms)
