"""The one-GPU benchmark's estimator, stop rule, plan and merge, on recorded or simulated numbers (no GPU)."""

from __future__ import annotations

import json
import math
import random
import statistics

import pytest

from benchmarks import recorder_gpu, recorder_gpu_stats as gs


def two_level(rng: random.Random, n: int, weight: float, stay: float) -> list[float]:
    """A process's batches as the all_gather cells showed them: at 18 or 20.5 us (the slow level with
    probability `weight`), 1% jitter, a level kept from one batch to the next with probability `stay`."""
    slow = rng.random() < weight
    out = []
    for _ in range(n):
        if rng.random() > stay:
            slow = rng.random() < weight
        out.append((20.5 if slow else 18.0) * (1 + 0.01 * rng.gauss(0, 1)))
    return out


def mad_paired(base: list[float], other: list[float]) -> dict:
    """The former estimator, kept here as the foil (the benchmark used it in both layouts until 2026-12-07): the
    median of the per-round differences with 1.2533 x 1.4826 x MAD / sqrt(n) as its spread."""
    diffs = gs.round_diffs(base, other)
    med = statistics.median(diffs)
    mad = statistics.median(abs(d - med) for d in diffs)
    return {"pct": med, "spread": 1.2533 * 1.4826 * mad / len(diffs) ** 0.5}


def rms_z(estimate, runs: int = 60, n: int = 300, weight: float = 0.3, stay: float = 0.9) -> float:
    """Two groups without the recorder (an A/A: the true cost is 0), `runs` times: the rms of cost / spread,
    1 for an honest spread."""
    zs = []
    for seed in range(runs):
        rng = random.Random(seed)
        fig = estimate(two_level(rng, n, weight, stay), two_level(rng, n, weight, stay))
        zs.append(fig["pct"] / fig["spread"])
    return math.sqrt(sum(z * z for z in zs) / len(zs))


def test_trimmed_mean_drops_the_ends_and_keeps_the_middle():
    assert gs.trimmed_mean([1.0, 2.0, 3.0, 4.0, 100.0]) == 3.0  # one of five cut at each end
    assert gs.trimmed_mean([5.0]) == 5.0 and math.isnan(gs.trimmed_mean([]))
    assert gs.trimmed_mean([1.0, 2.0, 3.0, 4.0, 100.0], trim=0.0) == 22.0


def test_spreads_need_rounds_repeat_and_shrink_with_them():
    rng = random.Random(1)
    values = [100 + rng.gauss(0, 2) for _ in range(1600)]
    assert gs.block_bootstrap_se(values[:gs.MIN_ROUNDS - 1]) == float("inf") == gs.segments_se(values[:29])
    assert gs.spread(values[:100]) == gs.spread(values[:100])  # seeded: recomputable
    few, many = gs.spread(values[:100]), gs.spread(values)
    assert 1.8 < few / many < 6  # sixteen times the rounds: about a quarter of the spread (each estimate ±25%)
    assert 0.05 < many < 0.1  # the median's: 1.25 x sigma 2 / sqrt(1600) = 0.063, the larger of two estimates
    assert gs.spread(values) == max(gs.block_bootstrap_se(values), gs.segments_se(values))


def test_the_spread_is_honest_on_two_level_batches_where_the_mad_was_not():
    """The A/A of a cell whose batches sit at two levels that last several rounds: the former spread (MAD
    of the paired rounds) is 2-3 times too small, so its A/A reads 'offsets' that are noise; the new one
    stays near 1, and so does the trimmed mean's beside it."""
    old = rms_z(mad_paired)
    new = rms_z(gs.paired_figure)
    assert old > 2.0
    assert new < 1.4
    assert rms_z(gs.paired_figure, weight=0.5, stay=0.0) < 1.4  # independent batches: honest too
    mean = rms_z(lambda b, c: {"pct": gs.paired_figure(b, c)["tmean_pct"],
                               "spread": gs.paired_figure(b, c)["tmean_spread"]}, runs=20)
    assert mean < 1.4


def test_adaptive_stop_stays_honest_and_its_floor_guards_a_lasting_level():
    """Stopping when the spread first dips under the target picks the runs whose spread dipped by chance;
    over 12 simulated A/A cells the stop still reads rms z near 1. And a cell whose first 60 rounds found the
    two groups at different levels would stop at 30 rounds on a 14% 'cost' with a floor of 30 rounds; with
    ~125 (--min-cell-s) it waits until the levels have come and gone."""
    zs = []
    for seed in range(12):
        rng = random.Random(100 + seed)
        base, other = two_level(rng, 1200, 0.5, 0.8), two_level(rng, 1200, 0.5, 0.8)
        n = gs.replay_stop({"base": base, "recorder": other}, 0.5, 125)
        fig = gs.paired_figure(base[:n], other[:n])
        zs.append(fig["pct"] / fig["spread"])
    assert math.sqrt(sum(z * z for z in zs) / len(zs)) < 1.4
    rng = random.Random(5)
    mixed_b, mixed_o = two_level(rng, 1000, 0.5, 0.0), two_level(rng, 1000, 0.5, 0.0)
    base = [18.0 * (1 + 0.01 * rng.gauss(0, 1)) for _ in range(60)] + mixed_b
    other = [20.5 * (1 + 0.01 * rng.gauss(0, 1)) for _ in range(60)] + mixed_o
    samples = {"base": base, "recorder": other}
    assert gs.replay_stop(samples, 0.5, 30) == 30  # a lasting level fools any spread of 30 rounds
    late = gs.replay_stop(samples, 0.5, 125)
    assert late > 125 and abs(gs.paired_figure(base[:late], other[:late])["pct"]) < 2


def test_paired_figure_cancels_a_drift_and_tells_how_rounds_follow_each_other():
    base = [100.0 * (1 + 0.4 * i / 49) for i in range(50)]
    fig = gs.paired_figure(base, [b * 1.01 for b in base])
    assert abs(fig["pct"] - 1.0) < 1e-9 and fig["spread"] < 1e-9 and fig["n"] == 50
    assert math.isnan(gs.paired_figure([1.0, 2.0], [1.0, 2.0])["pct"])
    steady = gs.lag1([1.0, -1.0] * 20)
    lasting = gs.lag1([1.0] * 10 + [-1.0] * 10 + [1.0] * 10 + [-1.0] * 10)
    assert steady < -0.9 and lasting > 0.8


def test_stop_rule_waits_for_rounds_then_for_every_paired_spread():
    rng = random.Random(2)
    steady = [100 + rng.gauss(0, 0.3) for _ in range(40)]
    samples = {"base": steady, "recorder": [v * 1.01 for v in steady], "control": list(steady)}
    assert gs.resolved(samples, 0.5)
    assert not gs.resolved({m: v[:gs.MIN_ROUNDS - 1] for m, v in samples.items()}, 0.5)
    noisy = [100 + rng.gauss(0, 20) for _ in range(40)]
    assert not gs.resolved({**samples, "control": noisy}, 0.5)  # the A/A must resolve too
    drift = [100.0 * (1 + 0.4 * i / 39) for i in range(40)]
    paired_only = {"base": drift, "recorder": [v * 1.01 for v in drift]}
    assert gs.resolved(paired_only, 0.5) and not gs.resolved(paired_only, 0.5, latency_too=True)
    assert gs.replay_stop(samples, 0.5) == gs.MIN_ROUNDS and gs.replay_stop({**samples, "control": noisy}, 0.5) == 40
    assert gs.next_check(12) == 13 and gs.next_check(100) == 114


class Replay:
    """A group that answers every batch with the next of its recorded seconds per call."""

    def __init__(self, values: list[float]) -> None:
        self.values, self.asked = iter(values), 0

    def ask(self, cmd: dict, timeout: float) -> dict:
        self.asked += 1
        return {"sec": next(self.values)}


def test_alternate_stops_as_soon_as_resolved_or_at_its_budget():
    rng = random.Random(3)
    steady = [1e-5 * (1 + 0.001 * rng.gauss(0, 1)) for _ in range(1000)]
    groups = {"base": Replay(steady), "recorder": Replay([v * 1.02 for v in steady]), "control": Replay(steady)}
    res = recorder_gpu.alternate(groups, {"cmd": "op"}, budget_s=60, target=0.5)
    assert res["stop"] == "resolved" and groups["base"].asked == gs.MIN_ROUNDS
    assert set(res["paired"]) == {"recorder", "control"} and abs(res["paired"]["control"]["pct"]) < 0.05
    assert abs(res["paired"]["recorder"]["pct"] - 2.0) < 0.01 and len(res["rounds_us"]["recorder"]) == gs.MIN_ROUNDS
    noisy = [1e-5 * (1 + 0.2 * rng.gauss(0, 1)) for _ in range(100_000)]
    slow = {"base": Replay(noisy), "recorder": Replay(noisy[::-1])}
    res = recorder_gpu.alternate(slow, {"cmd": "op"}, budget_s=0.05, target=0.5)
    assert res["stop"] == "budget" and res["paired"]["recorder"]["spread"] >= 0.5


def test_plan_scales_rounds_by_the_spread_and_marks_cells_past_the_cap():
    row = {"layout": "1 rank", "what": "all_gather", "bytes": 8, "per_batch": 1000, "seconds": 20.0,
           "base": {"median_us": 20.0, "spread_pct": 2.0, "n": 50},
           "paired": {"recorder": {"pct": 0.0, "spread": 2.0, "n": 50},
                      "control": {"pct": 0.0, "spread": 1.0, "n": 50}}}
    (cell,) = gs.plan([row], 0.5, 0.01)
    assert cell["rounds_now"] == pytest.approx(800) and cell["seconds_now"] == pytest.approx(320)
    assert cell["rounds_new"] == pytest.approx(800)  # the A/A read 0: nothing to inflate
    assert cell["overhead_ms"] == pytest.approx(20000 / 50 / 3 - 20)  # what a round took beyond its batches
    assert not cell["capped"]
    (capped,) = gs.plan([row], 0.5, 0.01, cap_s=10)
    assert capped["capped"] and capped["seconds_new"] == 10 and capped["spread_new"] > 0.5
    off = {**row, "paired": {**row["paired"], "control": {"pct": 2.0, "spread": 1.0, "n": 50}}}
    assert gs.understatement([off]) == 2.0  # the A/A 2 spreads off: every spread read twice as large
    assert gs.plan([off], 0.5, 0.01)[0]["rounds_new"] == pytest.approx(800 * 4)
    assert gs.plan([row], 0.5, 0.01, min_s=1000)[0]["rounds_new"] > 800  # the floor in seconds


def test_plan_reads_each_layouts_overhead_and_rounds_of_its_own():
    """A round of 8 ranks over sockets spends more outside its batches than a 1-rank round, and a run without a
    control has two batches a round: a layout's plan must not borrow the other's."""
    one = {"layout": "1 rank", "what": "all_reduce", "bytes": 8, "per_batch": 1000, "seconds": 30 * 3 * 0.012,
           "base": {"median_us": 10.0, "spread_pct": 1.0, "n": 30},
           "paired": {"recorder": {"pct": 0.0, "spread": 1.0, "n": 30},
                      "control": {"pct": 0.0, "spread": 1.0, "n": 30}}}
    hosts = {**one, "layout": "8 hosts (MPS)", "per_batch": 2000, "seconds": 30 * 2 * 0.05,
             "rounds_us": {"base": [20.0] * 30, "recorder": [20.0] * 30},
             "paired": {"recorder": {"pct": 0.0, "spread": 1.0, "n": 30}}}
    by_layout = {c["layout"]: c for c in gs.plan([one, hosts], 0.5, None)}
    assert by_layout["1 rank"]["overhead_ms"] == pytest.approx(2.0)  # 12 ms a batch of 10 ms
    assert by_layout["8 hosts (MPS)"]["overhead_ms"] == pytest.approx(30.0)  # 50 ms a batch of 20 ms, 2 a round
    assert by_layout["8 hosts (MPS)"]["seconds_new"] == pytest.approx(120 * 2 * 0.05)  # its own batch kept
    assert gs.modes_of(hosts, 3) == 2 and gs.modes_of(one, 3) == 3


def row(what: str, nbytes: int, pct: float, **extra) -> dict:
    fig = {"median_us": 10.0, "tmean_us": 10.0, "spread_pct": 0.1, "n": 20}
    return {"layout": "1 rank", "what": what, "bytes": nbytes, "per_batch": 100, "goal_pct": 3.0, "base": fig,
            "recorder": {**fig, "tmean_us": 10.0 * (1 + pct / 100)}, "stop": "resolved",
            "paired": {"recorder": {"pct": pct, "spread": 0.2, "n": 20}}, **extra}


def test_merge_keeps_the_later_call_lists_repeats_and_never_lets_an_error_hide_a_figure(tmp_path):
    a = [row("all_reduce", 8, 1.0), row("sendrecv", 8, 2.0), {"layout": "1 rank", "what": "all_gather", "bytes": 8,
                                                                "error": "time cap reached"}]
    b = [row("all_gather", 8, 0.5), row("all_reduce", 8, 1.5, stop="cap"),
         {"layout": "1 rank", "what": "sendrecv", "bytes": 8, "error": "group down"}]
    rows, repeats = gs.merge_rows([a, b])
    got = {(r["what"]): r for r in rows}
    assert got["all_gather"]["paired"]["recorder"]["pct"] == 0.5  # the later call measured what the first could not
    assert got["all_reduce"]["paired"]["recorder"]["pct"] == 1.5
    assert got["sendrecv"]["paired"]["recorder"]["pct"] == 2.0  # a later error does not hide a figure
    assert [r["cell"][1] for r in repeats] == ["all_reduce", "sendrecv"]
    parts = []
    for i, rows_of in enumerate((a, b)):
        folder = tmp_path / f"part{i}"
        folder.mkdir()
        (folder / "results.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows_of))
        (folder / "facts.json").write_text(json.dumps({"gpu": "H100", "target_spread_pct": 0.5, "part": i}))
        parts.append(folder)
    recorder_gpu.merge(tmp_path / "merged", parts)
    table = (tmp_path / "merged" / "table.md").read_text()
    stopped = [line for line in table.splitlines() if line.startswith("Stopped")]  # the cells left unresolved
    assert table.count("| 1 rank |") == 3 and len(stopped) == 1 and stopped[0].endswith(": all_reduce 8B")
    assert "+1.00% ± 0.20 -> +1.50% ± 0.20" in table
    facts = json.loads((tmp_path / "merged" / "facts.json").read_text())
    assert [p["part"] for p in facts["parts"]] == [0, 1]
    assert len((tmp_path / "merged" / "results.jsonl").read_text().splitlines()) == 3


def test_last_rows_keeps_a_refined_cells_last_line():
    lines = [json.dumps(row("all_reduce", 8, 1.0)), json.dumps(row("sendrecv", 8, 2.0)),
             json.dumps(row("all_reduce", 8, 3.0)), ""]
    rows = gs.last_rows(lines, json.loads)
    assert [(r["what"], r["paired"]["recorder"]["pct"]) for r in rows] == [("all_reduce", 3.0), ("sendrecv", 2.0)]
