"""The GPU scenario runner, checked without a GPU: arguments, culprits, per-rank environment."""

import json
import subprocess
import sys
from pathlib import Path

SCRIPT = Path(__file__).resolve().parents[3] / "scripts" / "device" / "nccl_scenarios.py"


def run(*args):
    return subprocess.run([sys.executable, str(SCRIPT), *args], capture_output=True, text=True, timeout=60)


def test_nccl_plan_matches_field_notes_setup(tmp_path):
    res = run("--dry-run", "--out-dir", str(tmp_path), "--extra-env", "NCCL_PROFILER_PLUGIN=/x/lib.so")
    assert res.returncode == 0, res.stderr
    plan = json.loads(res.stdout)
    assert list(plan) == ["sleep", "sigstop", "kill", "mismatch", "chain"]
    assert {k: v["culprit_rank"] for k, v in plan.items()} == {"sleep": 5, "sigstop": 3, "kill": 7, "mismatch": 1,
                                                                "chain": 3}
    env = plan["sleep"]["rank_env"]
    assert len(env) == 8 and [e["NCCL_HOSTID"] for e in env] == [f"node0{r}" for r in range(8)]
    e = env[5]
    assert (e["NCCL_SOCKET_IFNAME"], e["NCCL_IB_DISABLE"], e["NCCL_NVLS_ENABLE"], e["MASTER_ADDR"]) == (
        "lo", "1", "0", "127.0.0.1")
    assert e["NCCL_PROXY_DUMP_SIGNAL"] == "10" and e["TORCH_NCCL_DUMP_ON_TIMEOUT"] == "1"
    assert e["NCCL_DEBUG_FILE"].endswith("sleep/node05/nccl.%h.%p.log")
    assert e["TORCH_FR_DUMP_TEMP_FILE"].endswith("sleep/node05/fr_trace_rank_")
    assert e["NCCL_PROFILER_PLUGIN"] == "/x/lib.so"
    assert len({e["MASTER_PORT"] for s in plan.values() for e in s["rank_env"][:1]}) == 5


def test_bad_scenario_is_refused():
    res = run("--dry-run", "--scenarios", "sleep,nap")
    assert res.returncode == 2 and "unknown scenario" in res.stderr
