"""CPU cost of the recorder per NCCL profiler call, against empty entry points (CPU, no GPU).

Builds the plugin and nccl_patches/tests/microbench.c with gcc and runs both the
plugin and a do-nothing profiler through the same call sequence (one collective
on one channel with a send and a recv proxy op of 8 steps = 100 calls), in one
run. Prints ns per call and the added cost per collective; compare with an
all_reduce's latency to judge overhead (benchmarks/recorder_overhead.py does
that on the GPU).

    python benchmarks/recorder_event_cost.py [--iterations 200000]
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from forensics import recorder_build  # noqa: E402

GOAL_US = 1.5


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--iterations", type=int, default=200_000)
    args = ap.parse_args()
    plugin = recorder_build.build()
    with tempfile.TemporaryDirectory() as tmp:
        exe = Path(tmp) / "microbench"
        src = REPO / "nccl_patches"
        subprocess.run(["gcc", "-O2", f"-I{src / 'include'}", str(src / "tests" / "microbench.c"), "-o", str(exe),
                        "-ldl"], check=True)
        out = subprocess.run([str(exe), str(plugin), str(args.iterations)], check=True, capture_output=True,
                             text=True, env={"FORENSICS_RECORDER_DIR": tmp, "PATH": "/usr/bin:/bin"})
    data = json.loads(out.stdout)
    added = data["ns_per_call_plugin"] - data["ns_per_call_baseline"]
    print(f"calls: {data['iterations']} x {data['calls_per_iteration']}")
    print(f"baseline (empty entry points): {data['ns_per_call_baseline']:.1f} ns/call")
    print(f"recorder plugin:               {data['ns_per_call_plugin']:.1f} ns/call "
          f"(x{data['ns_per_call_plugin'] / max(data['ns_per_call_baseline'], 1e-9):.1f})")
    per_coll = added * 100 / 1000
    print(f"added per collective of 1 channel, 2 proxy ops x 8 steps: {per_coll:.2f} us")
    print(f"goal: under {GOAL_US} us of proxy-thread CPU added per collective (3% of a ~50 us small inter-node "
          f"all_reduce): {'met' if per_coll < GOAL_US else 'NOT met'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
