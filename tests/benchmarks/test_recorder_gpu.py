"""The one-GPU benchmark's own logic, on the CPU: a cell of either layout (rounds, stop reason), the verdict of
a row, and its chaining comparison run for real on the fake-NCCL harness (the same code the device run uses, but
NCCL)."""

from __future__ import annotations

import argparse
import json
import os
import random
from types import SimpleNamespace

from benchmarks import recorder_gpu
from benchmarks import recorder_gpu_stats as gpu_stats
from forensics import recorder_build


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


class Steady:
    """A group that answers every batch in `sec` seconds a call (scattered by `noise`), and keeps what it was asked."""

    def __init__(self, sec: float, noise: float = 0.0, seed: int = 0) -> None:
        self.sec, self.noise, self.rng, self.asked = sec, noise, random.Random(seed), []

    def ask(self, cmd: dict, timeout: float) -> dict:
        self.asked.append(cmd)
        return {"sec": self.sec * (1 + self.noise * self.rng.gauss(0, 1))}


def hosts_layout(groups: dict, cell_cap: float, min_cell_s: float = 0.0) -> SimpleNamespace:
    """What run_cell reads of a Layout of 8 hosts (the real one starts 8-rank groups)."""
    args = SimpleNamespace(cell_cap=cell_cap, dry_run=False, target_spread=0.5, latency_too=False,
                           min_cell_s=min_cell_s)
    return SimpleNamespace(name="8 hosts (MPS)", ranks=8, args=args, groups=groups, modes=tuple(groups),
                           batch_s=recorder_gpu.HOSTS_BATCH_S, patience=120.0)


def test_a_many_hosts_cell_runs_the_one_rank_method_and_says_why_it_stopped(tmp_path):
    """The 8-host layout's cells go through the same rounds, estimator and stop rule as the 1-rank ones: paired
    figures, raw rounds, a stop reason. A call longer than a batch is a batch of one without warm-up calls (they
    would triple a 256 MB round), the other groups warmed once before the first timed round."""
    rep = recorder_gpu.Report(tmp_path, {"backend": "nccl", "target_spread_pct": 0.5})
    groups = {"base": Steady(0.1), "recorder": Steady(0.101), "control": Steady(0.1)}
    recorder_gpu.run_cell(rep, hosts_layout(groups, cell_cap=5.0), "all_reduce", 256 << 20, share=100.0)
    (row,) = rep.rows
    assert row["layout"] == "8 hosts (MPS)" and row["per_batch"] == 1 and row["stop"] == "resolved"
    assert abs(row["paired"]["recorder"]["pct"] - 1.0) < 1e-9 and row["paired"]["control"]["pct"] == 0.0
    assert len(row["rounds_us"]["control"]) == gpu_stats.MIN_ROUNDS and row["goal_pct"] == 1.0
    timed = [c for c in groups["recorder"].asked if c["iters"] == 1 and c["warm"] == 0]
    assert len(timed) == gpu_stats.MIN_ROUNDS and groups["recorder"].asked[0]["warm"] == 1  # warmed, then timed
    noisy = {m: Steady(1e-4, noise=0.3, seed=i) for i, m in enumerate(("base", "recorder", "control"))}
    recorder_gpu.run_cell(rep, hosts_layout(noisy, cell_cap=0.3), "sendrecv", 8, share=100.0)
    assert rep.rows[-1]["stop"] == "cap" and rep.rows[-1]["per_batch"] > 100  # 20 ms of ~0.1 ms calls
    assert {c["warm"] for c in noisy["base"].asked[1:]} == {2}
    assert "| cap |" in recorder_gpu.Report.line(rep.rows[-1])
    assert (tmp_path / "table.md").read_text().splitlines()[-1].endswith(": sendrecv 8B")  # listed unresolved
    rep.add({**rep.rows[-1], "layout": "1 rank", "what": "all_gather"})
    assert (tmp_path / "table.md").read_text().splitlines()[-1].endswith(
        ": 8 hosts (MPS): sendrecv 8B; 1 rank: all_gather 8B")  # the same cells in two layouts told apart


def test_batch_warm_leaves_out_warm_up_only_for_a_batch_of_one_call():
    assert recorder_gpu.batch_warm(1) == 0 and recorder_gpu.batch_warm(2) == 2 and recorder_gpu.batch_warm(500) == 2


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


FAKE_MPS = """#!/bin/sh
# stands in for nvidia-cuda-mps-control: logs how it was called; -d fails when MPS_FAKE_FAIL is set
if [ "$1" = "-d" ]; then
  echo "start pipe=$CUDA_MPS_PIPE_DIRECTORY log=$CUDA_MPS_LOG_DIRECTORY" >> "$MPS_FAKE_LOG"
  [ -z "$MPS_FAKE_FAIL" ] || { echo "cannot start" >&2; exit 1; }
else
  echo "command=$(cat) pipe=$CUDA_MPS_PIPE_DIRECTORY" >> "$MPS_FAKE_LOG"
fi
"""


def test_private_mps_keeps_its_daemon_to_this_run_and_quits_it(tmp_path, monkeypatch):
    """--mps: the daemon's pipe and log folders are the run's own, the ranks started inside see them, nothing
    after does, and the same daemon is told to quit at the end; a daemon that does not start is said so."""
    bin_dir, log = tmp_path / "bin", tmp_path / "mps.log"
    bin_dir.mkdir()
    (bin_dir / "nvidia-cuda-mps-control").write_text(FAKE_MPS)
    (bin_dir / "nvidia-cuda-mps-control").chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}:{os.environ['PATH']}")
    monkeypatch.setenv("MPS_FAKE_LOG", str(log))
    monkeypatch.delenv("CUDA_MPS_PIPE_DIRECTORY", raising=False)
    work = tmp_path / "work"
    with recorder_gpu.private_mps(work, True) as how:
        assert how.startswith("MPS: a private control daemon")
        assert os.environ["CUDA_MPS_PIPE_DIRECTORY"] == str(work / "mps-pipe")
    assert "CUDA_MPS_PIPE_DIRECTORY" not in os.environ and "CUDA_MPS_LOG_DIRECTORY" not in os.environ
    assert log.read_text().splitlines() == [f"start pipe={work / 'mps-pipe'} log={work / 'mps-log'}",
                                            f"command=quit pipe={work / 'mps-pipe'}"]
    monkeypatch.setenv("MPS_FAKE_FAIL", "1")
    with recorder_gpu.private_mps(work, True) as how:
        assert how.startswith("no MPS") and how.endswith("cannot start)")  # the daemon's own stderr, kept
        assert "CUDA_MPS_PIPE_DIRECTORY" not in os.environ
    with recorder_gpu.private_mps(work, False) as how:
        assert how == "no MPS (not asked)"


def test_a_run_that_asked_for_mps_and_cannot_have_it_leaves_the_layout_out(tmp_path, monkeypatch):
    """On NCCL, 8 ranks without MPS measure the GPU's time slices (54 ms for 8 B, 2026-12-07): a call meant for
    MPS must not spend its device time on them. No group is started; facts.json says why."""
    monkeypatch.setenv("PATH", str(tmp_path))  # no nvidia-cuda-mps-control here
    rep = recorder_gpu.Report(tmp_path / "out", {"backend": "nccl"})
    args = SimpleNamespace(mps=True, backend="nccl", hosts=8)
    recorder_gpu.hosts_layout(rep, args, tmp_path / "plugin.so", tmp_path, hard_end=0.0)
    facts = json.loads((tmp_path / "out" / "facts.json").read_text())
    why = facts["phase_errors"]["hosts"]
    assert why.startswith("--mps asked") and "nvidia-cuda-mps-control not found" in why
    assert rep.rows == [] and not (tmp_path / "logs").exists()
