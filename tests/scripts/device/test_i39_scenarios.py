"""Issue 39's device matrix, checked without a GPU: plans drawn from the seed, their truth, each rank's env."""

import argparse
import importlib.util
import json
import subprocess
import sys
from pathlib import Path

SCRIPT = Path(__file__).resolve().parents[3] / "scripts" / "device" / "i39_scenarios.py"


def load():
    spec = importlib.util.spec_from_file_location("i39_scenarios", SCRIPT)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def plans(seed: int, *extra: str) -> dict:
    done = subprocess.run([sys.executable, str(SCRIPT), "--dry-run", "--seed", str(seed), *extra], capture_output=True,
                          text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def test_every_plan_is_a_consistent_truth():
    for seed in range(12):
        for case, p in plans(seed).items():
            w, cs = p["world"], p["culprits"]
            assert w in (4, 6, 8) and cs and all(0 <= c < w for c in cs), (seed, case, p)
            assert p["why"] and p["fault_class"]
            if case == "wrongpeer":
                assert cs[0] >= 2 and f"recv from rank {cs[0] - 2}" in p["why"]
            if case == "wrongpeersend":  # a sender before it, and the stage it skips between it and its receiver
                assert 1 <= cs[0] <= w - 3 and f"sends to rank {cs[0] + 2}" in p["why"]
            if case in ("sendsend", "recvrecv"):
                assert len(set(cs)) == 2 and cs == sorted(cs)
            if case == "recvrecv":  # at least one good exchange of the pair before the fault step
                assert p["fault_step"] >= 1 and p["fault_class"] == "p2p-recv-recv-deadlock"
                assert f"ranks {cs[0]} and {cs[1]}" in p["why"] and "recv" in p["why"]
            if case == "pipestall":
                assert 1 <= cs[0] <= w - 2  # a stage with a sender before it and a receiver after it
            if case == "monbarrier":
                assert cs[0] != 0  # rank 0 reports the absence: it is never the absent one
            if case == "ordermismatch":
                assert p["floats_culprit"] != p["floats"]
            if case == "subgroup":
                assert cs[0] in p["hung_group"] and set(p["healthy"]).isdisjoint(p["hung_group"])
                assert sorted(p["healthy"] + p["hung_group"]) == list(range(w))


def test_seeds_vary_culprit_world_and_size():
    drawn = [plans(seed) for seed in range(8)]
    for case in ("wrongpeer", "wrongpeersend", "sendsend", "recvrecv", "lock", "gpusleep"):
        assert len({json.dumps(d[case]["culprits"]) for d in drawn}) > 2, case
    assert len({d["lock"]["world"] for d in drawn}) > 1
    assert len({d["sendsend"]["floats"] for d in drawn}) > 1
    assert plans(5) == plans(5)  # the same seed, the same truth
    gaps = {d["recvrecv"]["culprits"][1] - d["recvrecv"]["culprits"][0] for d in drawn}
    assert 1 in gaps and max(gaps) > 1  # pairs of neighbours and pairs apart


def test_the_recv_recv_case_is_planned_on_both_backends():
    """The lead runs it on NCCL: its plan is drawn there as on gloo, and gloo keeps the drawn size (a recv with no
    send blocks at any size; sendsend alone needs more than the socket buffers on gloo)."""
    nccl, gloo = plans(41, "--cases", "recvrecv")["recvrecv"], plans(41, "--cases", "recvrecv", "--backend", "gloo")
    assert nccl == gloo["recvrecv"] and load().P2P_CASES.count("recvrecv") == 1


def test_gloo_dry_run_skips_gpu_only_cases_and_keeps_the_world():
    got = plans(39, "--backend", "gloo", "--world", "8")
    assert "gpusleep" not in got and all(p["world"] == 8 for p in got.values())


def test_rank_env_is_the_recommended_env_per_host(tmp_path):
    mod = load()
    args = mod.parse_args(["--out-dir", str(tmp_path), "--plugin", "/x/lib.so"])
    fenv = {"NCCL_DEBUG_FILE": "@DIR@/nccl.%h.%p.log", "TORCH_NCCL_ENABLE_TIMING": "1",
            "FORENSICS_RECORDER_COPY_DIR": "@DIR@", "NCCL_PROFILER_PLUGIN": "/other.so"}
    plan = mod.case_plan("wrongpeer", 39, "nccl", 8)
    env = mod.rank_env(args, plan, 3, tmp_path / "wrongpeer", 29900, fenv)
    logs = tmp_path / "wrongpeer" / "logs" / "node03"
    assert env["NCCL_DEBUG_FILE"] == f"{logs}/nccl.%h.%p.log" and env["FORENSICS_RECORDER_COPY_DIR"] == str(logs)
    assert (env["NCCL_HOSTID"], env["NCCL_SOCKET_IFNAME"], env["NCCL_IB_DISABLE"], env["NCCL_NVLS_ENABLE"]) == (
        "node03", "lo", "1", "0")
    assert env["NCCL_PROFILER_PLUGIN"] == "/x/lib.so" and env["TORCH_NCCL_ENABLE_TIMING"] == "1"
    assert env["RANK"] == "3" and env["WORLD_SIZE"] == "8"
    assert isinstance(args, argparse.Namespace)
