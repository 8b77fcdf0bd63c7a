"""The slow-link judge on real plugin output: four harness processes drive the recorder as NCCL
would for one 4-rank communicator (ring sends to rank+1), one of them with slow sends."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from parsers.input.archive import extract_into
from parsers.judges.links import judge_links
from parsers.readers.recorder import read_recorder_dir

pytestmark = pytest.mark.integration  # builds the plugin and harness with gcc, runs harness processes


def _job(harness, plugin, state_dir, send_wait_us: dict[int, int]) -> list:
    procs = []
    for rank in range(4):
        env = {"FORENSICS_RECORDER_DIR": str(state_dir), "HARNESS_NO_FINALIZE": "1", "HARNESS_RANK": str(rank),
               "RANK": str(rank), "HARNESS_SEND_WAIT_US": str(send_wait_us.get(rank, 300)), "PATH": "/usr/bin:/bin"}
        procs.append(subprocess.Popen([str(harness), str(plugin), "5", "run", "1", "30", "2", "2"], env=env,
                                      stdout=subprocess.PIPE, stderr=subprocess.PIPE))
    try:
        for p in procs:
            assert p.wait(timeout=60) == 0, p.stderr.read()
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.wait()
    states, problems = read_recorder_dir(state_dir)
    assert problems == [] and len(states) == 4
    return states


def test_one_slow_sender_is_its_link(plugin, harness, state_dir):
    found = judge_links(_job(harness, plugin, state_dir, {2: 4000}))
    assert found.timed and found.measure == "union" and found.ops == 24  # every 5th op a p2p one (not judged)
    assert found.slow == [(2, 3)], found.to_dict()
    assert found.excess_ms[(2, 3)] > 10  # 2 channels x 2 steps x (4 - 0.3) ms
    assert f"rank 2 ({found.hosts[2]}) -> rank 3 ({found.hosts[3]})" in found.describe()  # the link, its ends' hosts


def test_links_slow_alike_name_nothing(plugin, harness, state_dir):
    found = judge_links(_job(harness, plugin, state_dir, {r: 3000 for r in range(4)}))
    assert found.timed and found.ops == 24
    assert found.slow == [] and "no slow link" in found.describe()


def test_old_sums_are_not_judged_beside_unions(plugin, harness, state_dir, tmp_path):
    """Files of the old recorder (send waits summed over steps: the H200 run whose link 3 -> 4 was paced)
    read beside current ones (unions): one measure per job, the union, so the sums' link is not compared
    with the unions' and only the current job's slow link is named."""
    extract_into(Path(__file__).resolve().parents[2] / "fixtures" / "device" / "h200_links.tar.gz", tmp_path)
    round1 = tmp_path / "h200_links" / "slowlink" / "round1"
    old = [st for d in sorted({p.parent for p in round1.rglob("nccl-recorder*.bin")})
           for st in read_recorder_dir(d)[0]]
    assert old and all(op.send_wait_union_us is None for st in old for op in st.proxy_ops)
    assert all(st.send_wait_every == 1 for st in old)  # written before sampling: every span was timed
    assert judge_links(old).slow == [(3, 4)] and judge_links(old).measure == "sum"  # alone: read as sums
    found = judge_links(_job(harness, plugin, state_dir, {2: 4000}) + old)
    assert found.measure == "union" and found.slow == [(2, 3)], found.to_dict()
    assert (3, 4) not in found.wait_ms and found.ops == 24
