"""Issue 14, collection side: real gloo jobs of scripts/device/nccl_scenarios.py, collected live.

Each test runs one scenario end to end (4 ranks, gloo timeout 8 s, about 25 s): the runner
starts the job, breaks one rank, runs `forensics collect --job MASTER_ADDR:PORT` while the
hang holds, lets the timeouts fire and stops everything. What is asserted is what
collection found (the verdict is judged elsewhere): the output files, the exception in
them, the DataLoader worker as a child, the spawn ranks and their recovered rank.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from forensics.bundle.reader import open_bundle
from hf_testpaths import REPO
from parsers.readers.exception import read_lines
from proc_stat import state_letter

pytestmark = pytest.mark.integration
SCRIPT = REPO / "scripts" / "device" / "nccl_scenarios.py"
PORTS = {"oom": 29810, "busy": 29820, "dataloader": 29830, "lateinit": 29840, "spawn": 29850}
#: the process-group timeout, s: 8 lets a scenario's waiting ranks end on their own soon after the collection; the
#: dataloader test needs its other ranks alive while `collect` finds them (on a loaded machine its start came after
#: their 8 s and it found rank 2 alone): theirs outlasts the scenario, whose hard end (--scenario-s) stops them
PG_TIMEOUT = {"dataloader": 60}


def run_scenario(name: str, out: Path) -> tuple[dict, object]:
    env = dict(os.environ, PYTHONPATH=str(REPO) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    collect = f"{sys.executable} -m forensics collect --job {{job}} -o {{dir}} -q"
    cmd = [sys.executable, str(SCRIPT), "--backend", "gloo", "--world", "4", "--out-dir", str(out), "--scenarios", name,
           "--pg-timeout", str(PG_TIMEOUT.get(name, 8)), "--settle-s", "4", "--scenario-s", "14", "--hang-s", "60",
           "--port-base", str(PORTS[name]), "--linger-s", "10", "--collect-cmd", collect]
    done = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    sdir = out / name
    truth = json.loads((sdir / "truth.json").read_text())
    assert any(n.startswith("collect exit") for n in truth["notes"]), truth["notes"]
    assert not [n for n in truth["notes"] if "scenario error" in n], truth["notes"]
    assert all(not Path(f"/proc/{pid}").exists() or state_letter(pid) == "Z" for pid in truth["pids"].values())
    return truth, open_bundle(sdir / "bundle")


def _rank(bundle, rank):
    return next(r for r in bundle.manifest.ranks if r.rank == rank)


def _outputs(bundle, rec):
    stdio = rec.collector("stdio")
    return stdio.details.get("outputs", []) if stdio else []


def test_oom_rank_output_found_live_and_its_exception_read(tmp_path):
    truth, bundle = run_scenario("oom", tmp_path)
    culprit = _rank(bundle, truth["culprit_rank"])
    assert culprit.pid == truth["culprit_pid"] and culprit.rank_source == "environ"
    outs = {o["stream"]: o for o in _outputs(bundle, culprit)}
    assert outs["stderr"]["kind"] == "fd" and outs["stderr"]["path"].endswith(f"rank{culprit.rank}.stderr")
    text = (bundle.root / outs["stderr"]["file"]).read_text()
    exc = read_lines(text.splitlines(), outs["stderr"]["file"]).last()
    assert exc.type == "torch.OutOfMemoryError" and exc.rank == culprit.rank
    assert exc.frame.function == "load_giant_batch"
    # post-mortem: the process ended with 1 and its file holds the same traceback
    assert truth["exit_codes"][str(culprit.rank)] == 1


def test_busy_rank_is_running_python(tmp_path):
    truth, bundle = run_scenario("busy", tmp_path)
    culprit = _rank(bundle, truth["culprit_rank"])
    spy = json.loads((bundle.root / culprit.collector("py-spy").files[0]).read_text())
    main = next(t for t in spy if t.get("thread_name") == "MainThread")
    assert main["frames"][0]["name"] == "preprocess_shard"
    proc = json.loads((bundle.root / culprit.collector("process_state").files[0]).read_text())
    assert culprit.state_before == "R" or proc["state"] == "R" or main.get("active")


def test_dataloader_worker_collected_as_child(tmp_path):
    truth, bundle = run_scenario("dataloader", tmp_path)
    ranks = sorted(r.rank for r in bundle.manifest.ranks)
    assert ranks == [0, 1, 2, 3]  # the worker inherits RANK but is no rank
    culprit = _rank(bundle, truth["culprit_rank"])
    assert len(culprit.children) == 1
    kid = culprit.children[0]
    assert kid.ppid == culprit.pid and kid.inherits_rank and kid.state == "S"
    spy = json.loads((bundle.root / kid.collectors[1].files[0]).read_text())
    names = [f["name"] for t in spy for f in t["frames"]]
    assert "ShardDataset.__getitem__" in names and "_worker_loop" in names
    rank_spy = json.loads((bundle.root / culprit.collector("py-spy").files[0]).read_text())
    main = next(t for t in rank_spy if t.get("thread_name") == "MainThread")
    assert "read_shards" in [f["name"] for f in main["frames"]]  # in the DataLoader loop (Queue.get once settled)
    assert all(not r.children for r in bundle.manifest.ranks if r.rank != culprit.rank)


def test_late_rank_found_before_init(tmp_path):
    truth, bundle = run_scenario("lateinit", tmp_path)
    assert sorted(r.rank for r in bundle.manifest.ranks) == [0, 1, 2, 3]
    culprit = _rank(bundle, truth["culprit_rank"])
    spy = json.loads((bundle.root / culprit.collector("py-spy").files[0]).read_text())
    assert "init_process_group" not in [f["name"] for t in spy for f in t["frames"]]
    store = read_lines((tmp_path / "lateinit" / "node00" / "rank0.stderr").read_text().splitlines()).last()
    assert store.category == "store-timeout" and store.details["clients_joined"] == 3


def test_spawn_ranks_found_without_rank_env_and_rank_recovered(tmp_path):
    truth, bundle = run_scenario("spawn", tmp_path)
    recs = bundle.manifest.ranks
    assert sorted(r.pid for r in recs) == sorted(truth["pids"].values())
    how = [(r.pid, r.rank, r.rank_source, r.job_evidence) for r in recs]  # why a rank was not recovered, if so
    assert {r.rank: r.pid for r in recs} == {int(k): v for k, v in truth["pids"].items()}, how
    assert {r.rank_source for r in recs} == {"py-spy-locals"}, how
    assert {r.ppid for r in recs} == {truth["launcher_pid"]}
    assert len({r.job_id for r in recs}) == 1
    assert all(any("spawned by pid" in e for e in r.job_evidence) for r in recs)
    culprit = _rank(bundle, truth["culprit_rank"])
    assert culprit.collector("flight_recorder") is not None
    out = _outputs(bundle, culprit)
    assert out and out[0]["path"].endswith("spawn.stdout")
