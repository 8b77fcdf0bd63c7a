"""The one-GPU benchmark's own logic, on the CPU: the spread it stops on, the verdict of a row, and its
chaining comparison run for real on the fake-NCCL harness (the same code the device run uses, but NCCL)."""

from __future__ import annotations

import argparse
import json

from benchmarks import recorder_gpu
from forensics import recorder_build


def test_spread_of_the_median_shrinks_with_samples_and_needs_three():
    assert recorder_gpu.rel_spread([10.0, 11.0]) == float("inf")
    noisy = [100.0, 101.0, 99.0, 102.0, 98.0]
    few, many = recorder_gpu.rel_spread(noisy), recorder_gpu.rel_spread(noisy * 4)
    assert 0 < many < few  # same scatter, four times the samples: half the spread
    assert abs(few / many - 2.0) < 0.01
    assert recorder_gpu.rel_spread([5.0] * 7) == 0.0


def test_paired_rounds_cancel_a_drift_that_the_medians_keep():
    # the machine slows by 40% over the run; the recorder's batch is 1% slower than the base's of its round
    base = [100.0 * (1 + 0.4 * i / 49) for i in range(50)]
    rec = [b * 1.01 for b in base]
    assert recorder_gpu.rel_spread(base) > 1.0  # the drift spreads each median
    pair = recorder_gpu.paired(base, rec)
    assert abs(pair["pct"] - 1.0) < 1e-9 and pair["spread"] < 1e-9 and pair["n"] == 50
    assert recorder_gpu.paired([1.0, 2.0], [1.0, 2.0])["spread"] == float("inf")  # fewer than three rounds


def test_a_row_says_met_within_spread_or_over():
    base = {"median_us": 100.0, "spread_pct": 0.2, "n": 9}
    row = {"layout": "1 rank", "what": "all_reduce", "bytes": 8, "per_batch": 1000, "goal_pct": 3.0, "base": base}
    assert "met" in recorder_gpu.Report.line({**row, "recorder": {**base, "median_us": 102.0}})
    noisy = {"median_us": 103.2, "spread_pct": 0.5, "n": 9}
    assert "within spread" in recorder_gpu.Report.line({**row, "recorder": noisy})
    assert "OVER" in recorder_gpu.Report.line({**row, "recorder": {**base, "median_us": 104.0}})
    unspread = {"median_us": 101.0, "spread_pct": float("inf"), "n": 2}
    assert "no spread" in recorder_gpu.Report.line({**row, "recorder": unspread})
    failed = {"layout": "1 rank", "what": "sendrecv", "bytes": 8, "error": "boom"}
    assert "error: boom" in recorder_gpu.Report.line(failed)


def test_counts_compare_by_rank_and_communicator():
    one = {(0, 0): {"start": {"1": 3}, "stop": {"1": 3}, "state": {}, "bad_parent": 0}}
    assert recorder_gpu.compare_counts(one, dict(one))["equal"]
    other = {(0, 0): {"start": {"1": 2}, "stop": {"1": 2}, "state": {}, "bad_parent": 0}}
    res = recorder_gpu.compare_counts(one, other)
    assert not res["equal"] and res["differences"] and res["events_alone"]["start"] == 3
    assert not recorder_gpu.compare_counts({}, {})["equal"]  # nothing counted proves nothing


def test_chaining_phase_on_the_harness_finds_equal_counts(tmp_path):
    out = tmp_path / "out"
    rep = recorder_gpu.Report(out, {"backend": "gloo"})
    args = argparse.Namespace(backend="gloo", hosts=2)
    recorder_gpu.chain_phase(rep, args, recorder_build.build(), tmp_path)
    result = json.loads((out / "chaining.json").read_text())
    assert result["equal"] and result["communicators"] == 2 and result["differences"] == []
    assert result["events_alone"]["start"] > 1000


def test_many_hosts_row_takes_every_epoch_and_an_aa_from_the_base_epochs():
    """ABBA epochs of one group at a time: a cell's row pools each mode's batches over its epochs, and
    the A/A compares the base's first epoch with its later one (restart to restart: the method's floor)."""
    assert recorder_gpu.EPOCH_ORDER == ("base", "recorder", "recorder", "base")
    got = {"base": [(0, 1.00e-3), (0, 1.01e-3), (0, 0.99e-3), (3, 1.10e-3), (3, 1.11e-3), (3, 1.09e-3)],
           "recorder": [(1, 1.02e-3), (1, 1.03e-3), (2, 1.01e-3)]}
    row = recorder_gpu.hosts_row("8 hosts", ("all_reduce", 8), 12, got)
    assert row["base"]["n"] == 6 and row["recorder"]["n"] == 3 and row["epochs"] == [0, 1, 2, 3]
    assert abs(row["recorder"]["median_us"] - 1020.0) < 1e-6
    assert abs(row["control_of"]["median_us"] - 1000.0) < 1e-6 and abs(row["control"]["median_us"] - 1100.0) < 1e-6
    line = recorder_gpu.Report.line(row)
    assert "| 8 hosts | all_reduce |" in line and "+10.00% ±" in line  # the A/A column: later base vs first
    one_epoch = recorder_gpu.hosts_row("8 hosts", ("all_reduce", 8), 12, {**got, "base": got["base"][:3]})
    assert "control" not in one_epoch and "| - |" in recorder_gpu.Report.line(one_epoch)


def test_report_put_replaces_the_cell_it_refines(tmp_path):
    rep = recorder_gpu.Report(tmp_path, {"backend": "gloo"})
    base = {"median_us": 100.0, "spread_pct": 0.2, "n": 3}
    row = {"layout": "8 hosts", "what": "sendrecv", "bytes": 64, "per_batch": 5, "goal_pct": 3.0, "base": base}
    rep.put({**row, "recorder": {**base, "median_us": 150.0}})
    rep.put({**row, "what": "all_gather", "recorder": base})
    rep.put({**row, "recorder": {**base, "median_us": 101.0}})
    assert [(r["what"], r["recorder"]["median_us"]) for r in rep.rows] == [("all_gather", 100.0), ("sendrecv", 101.0)]
    table = (tmp_path / "table.md").read_text()
    assert "+1.00%" in table and "+50.00%" not in table
    assert len((tmp_path / "results.jsonl").read_text().splitlines()) == 3  # every refinement kept, in order
