"""Chaining: the recorder forwards every profiler call to a second plugin (FORENSICS_RECORDER_CHAIN).

The second plugin is tests/count_plugin.c: it counts the events, states and stops it receives and
checks that each parent and handle is one it made. Driven by the C harness the way NCCL drives a
plugin (only the event types of the mask init returned), its counts behind the recorder must equal
its counts alone, and the recorder's own state files must be what they are without a chained plugin.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from nccl_patches.harness import build_count_plugin, run_harness
from parsers.readers.recorder import read_recorder_dir

RUN = ["run", "2", "40", "2", "4"]  # 2 communicators, 40 ops each (8 p2p), 2 channels, 4 steps per proxy op


@pytest.fixture(scope="module")
def counter(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_count_plugin(tmp_path_factory.mktemp("count"))


def counts(path: Path) -> list[dict]:
    """The count plugin's lines, one per communicator, without what differs between runs (pid)."""
    rows = [json.loads(line) for line in path.read_text().splitlines()]
    for r in rows:
        r.pop("pid")
    return sorted(rows, key=lambda r: r["index"])


def recorded(state_dir: Path) -> list[tuple]:
    """What the recorder kept per communicator: ops and their children, proxy ops and their steps."""
    states, problems = read_recorder_dir(state_dir)
    assert problems == []
    return sorted((s.comm_id, s.coll_next, s.proxy_next, s.dropped_proxy,
                   tuple((c.kind, c.func, c.seq, c.state, c.proxy_started, c.proxy_done, c.kernel_started,
                          c.kernel_done) for c in s.colls),
                   tuple(sorted((o.channel, o.direction, o.peer, o.steps_done, o.n_steps) for o in s.proxy_ops)))
                  for s in states)


@pytest.mark.parametrize("version", [2, 3, 4, 5, 6])
@pytest.mark.parametrize("mask", ["0x5f", "0x42"])  # everything the harness sends; Inspector's Coll|KernelCh
def test_chained_plugin_sees_what_it_sees_alone(plugin, harness, counter, tmp_path, version, mask):
    base = {"HARNESS_HONOR_MASK": "1", "COUNT_PLUGIN_MASK": mask}
    alone, chained = tmp_path / "alone.jsonl", tmp_path / "chained.jsonl"
    rec_alone, rec_chained = tmp_path / "rec_alone", tmp_path / "rec_chained"
    rec_alone.mkdir(), rec_chained.mkdir()
    done = run_harness(harness, counter, version, RUN, {**base, "COUNT_PLUGIN_OUT": str(alone)})
    assert done.returncode == 0, done.stderr
    done = run_harness(harness, plugin, version, RUN, {
        **base, "COUNT_PLUGIN_OUT": str(chained), "FORENSICS_RECORDER_CHAIN": str(counter),
        "FORENSICS_RECORDER_DIR": str(rec_chained), "FORENSICS_RECORDER_KEEP": "1"})
    assert done.returncode == 0, done.stderr
    if version >= 4:  # v2/v3 init has no logger
        assert f"hang-forensics recorder chains {counter} (ncclProfiler_v{version})" in done.stderr
    got, want = counts(chained), counts(alone)
    assert len(want) == 2 and got == want
    assert all(r["bad_parent"] == 0 and r["bad_handle"] == 0 and r["open"] == 0 for r in got)
    assert want[0]["start"]["1"] == 32 and want[0]["start"]["6"] == 72  # 32 colls, 72 kernel channels per comm
    # the recorder records as it does with no plugin chained
    done = run_harness(harness, plugin, version, RUN, {
        **base, "FORENSICS_RECORDER_DIR": str(rec_alone), "FORENSICS_RECORDER_KEEP": "1"})
    assert done.returncode == 0, done.stderr
    assert recorded(rec_chained) == recorded(rec_alone)
    assert all(len(r[4]) == 40 and all(c[3] == "complete" for c in r[4]) for r in recorded(rec_chained))


@pytest.mark.parametrize("target", ["missing", "itself"])
def test_a_chain_that_cannot_load_leaves_the_recorder_alone(plugin, harness, tmp_path, target):
    path = tmp_path / "nope.so" if target == "missing" else plugin
    rec = tmp_path / "rec"
    rec.mkdir()
    done = run_harness(harness, plugin, 5, RUN, {"HARNESS_HONOR_MASK": "1", "FORENSICS_RECORDER_CHAIN": str(path),
                                                 "FORENSICS_RECORDER_DIR": str(rec), "FORENSICS_RECORDER_KEEP": "1"})
    assert done.returncode == 0, done.stderr
    why = "cannot load it" if target == "missing" else "it is the recorder itself"
    assert f"FORENSICS_RECORDER_CHAIN={path} not chained: {why}" in done.stderr
    assert done.stderr.count("not chained") == 1  # warned once, not per communicator
    assert [r[1] for r in recorded(rec)] == [40, 40]


def test_a_chained_plugin_whose_version_is_missing_is_named(plugin, harness, tmp_path):
    """A plugin without the interface NCCL picked (here v5: the count plugin built without it) is refused by name."""
    old = build_count_plugin(tmp_path, without_v5=True)
    rec = tmp_path / "rec"
    rec.mkdir()
    done = run_harness(harness, plugin, 5, RUN, {"HARNESS_HONOR_MASK": "1", "FORENSICS_RECORDER_CHAIN": str(old),
                                                 "FORENSICS_RECORDER_DIR": str(rec), "FORENSICS_RECORDER_KEEP": "1"})
    assert done.returncode == 0, done.stderr
    assert "it exports no ncclProfiler_v5" in done.stderr
    assert [r[1] for r in recorded(rec)] == [40, 40]


def test_the_count_plugin_tells_steps_one_after_another_from_steps_together(counter, harness, tmp_path):
    """The step-order probe the device run reports (benchmarks/recorder_gpu.py `step_order`): the harness's
    run mode completes each send step before it posts the next; its overlap mode holds two in SendWait at once."""
    def overlap(args: list[str], out: Path) -> dict[str, int]:
        done = run_harness(harness, counter, 5, args, {"COUNT_PLUGIN_OUT": str(out)})
        assert done.returncode == 0, done.stderr
        rows = [json.loads(line)["overlap"] for line in out.read_text().splitlines()]
        return {k: sum(sum(r.get(k, {}).values()) for r in rows) for k in ("send_ops", "multi_step", "pipelined")}

    one_after_another = overlap(RUN, tmp_path / "run.jsonl")
    assert one_after_another["send_ops"] > 0 and one_after_another["multi_step"] == one_after_another["send_ops"]
    assert one_after_another["pipelined"] == 0
    together = overlap(["overlap", "2000", "5000", "2000", "3000", "2000"], tmp_path / "overlap.jsonl")
    assert together == {"send_ops": 1, "multi_step": 1, "pipelined": 1}
