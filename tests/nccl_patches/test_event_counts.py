"""What one collective costs the recorder in clock reads and atomics, counted by a build that counts them.

The cost per collective (issue 44) is mostly these: a precise stamp is a counter read and a multiply
(a clock_gettime where the counter is not trusted), an atomic read-modify-write a locked instruction.
The design keeps them to what a live read needs, and these tests hold it there:
  precise: an op's start and its completion, and a send op's SendWait span opening and closing
           (send_wait_union_us: the count of its steps in SendWait going 0 -> 1 and 1 -> 0); where each
           span holds one step (steps one after another), one span in FORENSICS_RECORDER_SEND_WAIT_EVERY
           (default 4; RECORDER_FLAG_SEND_WAIT_SAMPLED); the enqueue stamp is on the event clock
  RMW:     per op the ring slot and the completion; per proxy op its slot (index and claim) and
           its parent's started/done counters; per kernel channel its started/done counters
  coarse:  none while the heartbeat publishes the event clock
tests/microbench.c drives the plugin as NCCL does: launch path (Group, Coll), then per channel a
kernel channel and a send and a receive proxy op of STEPS steps with their states.
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

from nccl_patches.harness import build_counting_recorder, build_microbench

FIELDS = ("precise", "tick", "coarse", "rmw")


@pytest.fixture(scope="module")
def tools(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    out = tmp_path_factory.mktemp("counting")
    return build_microbench(out), build_counting_recorder(out)


def counted(tools: tuple[Path, Path], tmp_path: Path, channels: int, steps: int,
            pipelined: bool = False, every: int | None = None) -> dict[str, dict[str, int]]:
    """The counts of one collective: {'launch': {...}, 'whole': {...}}; `pipelined`: each send step stops
    after the next entered SendWait (MICROBENCH_PIPELINED), else before it; `every`: one one-step SendWait
    span in N timed (FORENSICS_RECORDER_SEND_WAIT_EVERY; None: the writer's default)."""
    exe, plugin = tools
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "FORENSICS_RECORDER_DIR": str(tmp_path),
           "FORENSICS_RECORDER_SNAPSHOT_ON_FINALIZE": "0", "MICROBENCH_COUNT": "1", "MICROBENCH_STEPS": str(steps),
           "MICROBENCH_PIPELINED": "1" if pipelined else "0"}
    if every is not None:
        env["FORENSICS_RECORDER_SEND_WAIT_EVERY"] = str(every)
    out = subprocess.run([str(exe), "10", "1", str(channels), f"rec={plugin}"], env=env, capture_output=True,
                         text=True, timeout=60, check=True)
    rec = json.loads(out.stdout)["counts"]["rec"]
    return {path: dict(zip(FIELDS, rec[path])) for path in ("launch", "whole")}


@pytest.mark.parametrize(("channels", "steps"), [(1, 8), (4, 8), (1, 1), (2, 3)])
def test_precise_reads_are_op_ends_and_send_waits(tools, tmp_path, channels, steps):
    c = counted(tools, tmp_path, channels, steps, every=1)
    assert c["launch"]["precise"] == 1  # the op's start; its enqueue reads the event clock
    # + completion; send steps one after another, every span timed: each opens and closes its own
    assert c["whole"]["precise"] == 2 + 2 * steps * channels


@pytest.mark.parametrize(("channels", "steps", "every"), [(1, 8, None), (4, 8, None), (1, 1, None), (2, 9, None),
                                                          (1, 8, 2), (1, 5, 3)])
def test_one_step_spans_are_timed_one_in_every(tools, tmp_path, channels, steps, every):
    """Steps one after another, each a span of its own: the first span of a send op is timed, then one in
    `every` (4 by default): 2 counter reads per timed span, ceil(steps / every) of them an op."""
    c = counted(tools, tmp_path, channels, steps, every=every)
    timed = -(-steps // (every or 4))
    assert c["launch"]["precise"] == 1
    assert c["whole"]["precise"] == 2 + 2 * timed * channels


@pytest.mark.parametrize(("channels", "steps"), [(1, 8), (4, 8), (1, 1), (2, 3)])
def test_pipelined_send_steps_take_two_precise_reads_an_op(tools, tmp_path, channels, steps):
    """Steps on the network together (NCCL's send proxy while the network is behind) keep the op's span
    open: 2 precise reads per send op, whatever its steps."""
    c = counted(tools, tmp_path, channels, steps, pipelined=True)
    assert c["launch"]["precise"] == 1
    assert c["whole"]["precise"] == 2 + 2 * channels


@pytest.mark.parametrize(("channels", "steps"), [(1, 8), (4, 8), (1, 1)])
def test_atomics_do_not_grow_with_steps(tools, tmp_path, channels, steps):
    c = counted(tools, tmp_path, channels, steps)
    assert c["launch"]["rmw"] == 1  # the ring slot
    assert c["whole"]["rmw"] == 2 + 10 * channels  # + completion; per channel 2 proxy ops x 4, kernel channel x 2


def test_no_coarse_clock_reads_while_the_tick_runs(tools, tmp_path):
    c = counted(tools, tmp_path, 2, 8)
    assert c["whole"]["coarse"] == 0
    assert c["whole"]["tick"] > 0  # the other stamps are loads of the published tick
