"""Device scenario: N ranks on one GPU, one SIGSTOPped mid-stream; name it from the recorder.

Runs real NCCL (the one inside torch's wheel) with the recorder plugin loaded via
NCCL_PROFILER_PLUGIN, all_reducing a large tensor in a loop. After warm-up it
SIGSTOPs --victim, waits, reads every rank's state file live (without signalling
anyone), asks the live ranks for text snapshots (SIGUSR2), copies everything to
--out as a fixture with the truth, prints the analysis, and kills the job.

    python nccl_patches/device/sigstop_scenario.py --ranks 8 --victim 3 \
        --out tests/fixtures/recorder/sigstop8

Exit status 0 when the analysis names the victim first, 1 otherwise, 2 on setup failure.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))

from forensics import recorder_build  # noqa: E402
from parsers.readers.recorder import read_recorder_file  # noqa: E402
from parsers.judges.recorder import analyse  # noqa: E402

WORKER = Path(__file__).resolve().parent / "worker.py"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def rank_env(rank: int, world: int, port: int, plugin: Path | None, state_dir: Path, log_dir: Path) -> dict[str, str]:
    """Many ranks on one GPU: a distinct NCCL_HOSTID per rank makes NCCL treat each as its own node."""
    env = dict(os.environ)
    env.update(
        RANK=str(rank), WORLD_SIZE=str(world), LOCAL_RANK="0", MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port),
        NCCL_HOSTID=f"node{rank:02d}", NCCL_SOCKET_IFNAME="lo", NCCL_IB_DISABLE="1",
        NCCL_DEBUG="INFO", NCCL_DEBUG_SUBSYS="INIT,ENV", NCCL_DEBUG_FILE=str(log_dir / "nccl.%h.%p.log"),
        FORENSICS_RECORDER_DIR=str(state_dir), FORENSICS_RECORDER_HEARTBEAT_MS="100",
        TORCH_NCCL_ASYNC_ERROR_HANDLING="0",
    )
    if plugin is not None:
        env["NCCL_PROFILER_PLUGIN"] = str(plugin)
    return env


def wait_for_iters(outs: list[Path], n: int, timeout: float) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if all(f"iter {n}" in p.read_text(errors="replace") for p in outs):
            return True
        time.sleep(0.5)
    return False


def _options() -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--ranks", type=int, default=8)
    ap.add_argument("--victim", type=int, default=3)
    ap.add_argument("--numel", type=int, default=16 << 20, help="floats per all_reduce (default 64 MB)")
    ap.add_argument("--warm-iters", type=int, default=10)
    ap.add_argument("--wait", type=float, default=8.0, help="seconds between SIGSTOP and reading")
    ap.add_argument("--plugin", type=Path, help="prebuilt plugin (default: build with gcc)")
    ap.add_argument("--python", default=sys.executable)
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--backend", default="nccl", help="gloo: CPU dry run of the orchestration (no recorder data)")
    return ap.parse_args()


def _say(loaded: list[str], stalls: list, suspects: list, victim_pid: int) -> int:
    """Print what NCCL loaded, the stuck ops' wait edges, the first suspects and the verdict; 0 when the
    first suspect is the stopped rank."""
    for line in loaded[:3]:
        print(line)
    for st in stalls:
        print(f"comm {st.comm_id} stuck op {st.op}: {len(st.edges)} wait edges")
        for e in st.edges:
            print(f"  rank {e.waiter} -> {e.peer} ch {e.channel} {e.state} {e.detail}")
    for s in suspects[:3]:
        print(f"suspect: {s.label}: {s.reason} [{s.reason_class} {s.confidence:.2f}]")
    named = bool(suspects) and suspects[0].pid == victim_pid
    print("VERDICT", "named the victim" if named else "did NOT name the victim")
    return 0 if named else 1


def main() -> int:
    args = _options()
    plugin = (args.plugin or recorder_build.build()).resolve()
    state_dir = Path(tempfile.mkdtemp(prefix="hf-recorder-", dir="/dev/shm"))
    work = Path(tempfile.mkdtemp(prefix="hf-sigstop-"))
    log_dir = work / "logs"
    log_dir.mkdir()
    port = free_port()
    procs: list[subprocess.Popen] = []
    outs = [work / f"rank{r}.out" for r in range(args.ranks)]
    try:
        for r in range(args.ranks):
            env = rank_env(r, args.ranks, port, plugin, state_dir, log_dir)
            with open(outs[r], "w") as fh:
                procs.append(subprocess.Popen([args.python, str(WORKER), "stream", "--numel", str(args.numel),
                                               "--backend", args.backend],
                                              env=env, stdout=fh, stderr=subprocess.STDOUT, start_new_session=True))
        if not wait_for_iters(outs, args.warm_iters, 240):
            print("ranks did not warm up; outputs:", file=sys.stderr)
            for p in outs:
                print(p.read_text(errors="replace")[-2000:], file=sys.stderr)
            return 2
        victim = procs[args.victim]
        os.kill(victim.pid, signal.SIGSTOP)
        stopped_ns = time.time_ns()
        print(f"SIGSTOP rank {args.victim} pid {victim.pid}", flush=True)
        time.sleep(args.wait)

        args.out.mkdir(parents=True, exist_ok=True)
        observed: dict[str, int] = {}
        for src in sorted(state_dir.glob("nccl-recorder.*.bin")):
            shutil.copyfile(src, args.out / src.name)
            observed[src.name] = time.time_ns()
        for r, p in enumerate(procs):
            if r != args.victim:
                os.kill(p.pid, signal.SIGUSR2)
        time.sleep(1.0)
        for src in sorted(state_dir.glob("nccl-recorder.*.txt")):
            shutil.copyfile(src, args.out / src.name)
        (args.out / "logs").mkdir(exist_ok=True)
        loaded = []
        for log in sorted(log_dir.glob("nccl.*.log")):
            shutil.copyfile(log, args.out / "logs" / log.name)
            loaded += [ln.strip() for ln in log.read_text(errors="replace").splitlines()
                       if "hang-forensics recorder" in ln or "NCCL version" in ln or "profiler plugin" in ln]
        if not observed:
            print(f"no recorder state files in {state_dir}: did NCCL load the plugin? "
                  f"(NCCL logs copied to {args.out / 'logs'}; look for 'profiler plugin')", file=sys.stderr)
        states = [read_recorder_file(args.out / name, observed_ns=ns) for name, ns in observed.items()]
        stalls = analyse(states)
        suspects = sorted((s for st in stalls for s in st.suspects), key=lambda s: -s.confidence)
        truth = {
            "scenario": "sigstop-mid-allreduce-stream",
            "ranks": args.ranks,
            "victim_rank": args.victim,
            "victim_pid": victim.pid,
            "pids": {str(r): p.pid for r, p in enumerate(procs)},
            "stopped_ns": stopped_ns,
            "observed_ns": observed,
            "numel": args.numel,
            "nccl_log_lines": loaded[: 4 * args.ranks],
        }
        (args.out / "truth.json").write_text(json.dumps(truth, indent=1) + "\n")
        (args.out / "analysis.json").write_text(json.dumps({
            "stalls": [{"comm_id": s.comm_id, "op": s.op, "edges": [e.__dict__ for e in s.edges],
                        "suspects": [x.to_dict() for x in s.suspects]} for s in stalls]}, indent=1) + "\n")
        return _say(loaded, stalls, suspects, victim.pid)
    finally:
        for p in procs:
            try:
                os.killpg(p.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        for p in procs:
            p.wait(timeout=30)
        shutil.rmtree(state_dir, ignore_errors=True)
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
