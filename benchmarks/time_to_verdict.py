"""Time to verdict: `forensics collect` then `forensics analyze` on a real hung job, as an on-call engineer runs them.

Issue 39 item 8 asks for at most 5 s from starting collect to the printed verdict for 8 ranks. Starts a real
N-rank gloo job (one rank sleeps outside the collective: a hang), then, in the same run and interleaved,
for each checkout named by --repo (e.g. main's, to compare before/after) and each --second-look value:
collect (by pid, as a user does), analyze, each timed from outside (wall seconds of the CLI processes).
Prints the medians, each as a ratio to the first row, and what each collector cost (the manifest's
per-host `costs`, where the checkout writes them).

    python benchmarks/time_to_verdict.py --ranks 8 --repeat 3 --repo /work/main --repo .
    python benchmarks/time_to_verdict.py --native --second-look 3 --second-look 0 --json out.json

On the GPU machine the same runs on an NCCL job when given --pids of a hung job (the job is then not started
here, and not stopped either).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from forensics.demo.launcher import start_job, stop_job, wait_for_hang

REPO = Path(__file__).resolve().parents[1]
GOAL_S = 5.0


def cli(repo: Path, args: list[str], timeout: float = 300) -> tuple[float, int, str]:
    """Run one checkout's CLI; (wall seconds, exit code, stdout)."""
    env = dict(os.environ, PYTHONPATH=str(repo), COLUMNS="120")
    start = time.perf_counter()
    done = subprocess.run([sys.executable, "-m", "forensics", *args], capture_output=True, text=True, env=env,
                          timeout=timeout, cwd=repo)
    return time.perf_counter() - start, done.returncode, done.stdout


def one_run(repo: Path, pids: list[int], second_look: float, native: bool, out: Path) -> dict:
    """collect + analyze once; the verdict's first line and the manifest's collector costs."""
    argv = ["collect", "--pid", ",".join(map(str, pids)), "-o", str(out), "-q", "--timeout", "15",
            "--second-look", f"{second_look:g}"] + (["--native"] if native else [])
    t_collect, rc_collect, _ = cli(repo, argv)
    t_analyze, rc_analyze, text = cli(repo, ["analyze", str(out)])
    costs = {}
    try:
        manifest = json.loads((out / "manifest.json").read_text())
        costs = {h["host"]: h.get("costs") or {} for h in manifest.get("hosts", [])}
    except (OSError, ValueError):
        pass
    return {"collect_s": t_collect, "analyze_s": t_analyze, "total_s": t_collect + t_analyze,
            "rc": [rc_collect, rc_analyze],
            "verdict": (text.splitlines() or [""])[0][:160], "costs": costs}


def table(rows: dict[str, list[dict]]) -> list[str]:
    """Medians per row, with the ratio of each total to the first row's."""
    lines = [f"{'checkout / second look':44s} {'collect':>8s} {'analyze':>8s} {'total':>8s} {'ratio':>6s}  "
             f"goal {GOAL_S:g} s"]
    base = None
    for name, runs in rows.items():
        med = {k: statistics.median(r[k] for r in runs) for k in ("collect_s", "analyze_s", "total_s")}
        base = base or med["total_s"]
        lines.append(f"{name:44s} {med['collect_s']:8.2f} {med['analyze_s']:8.2f} {med['total_s']:8.2f} "
                     f"{med['total_s'] / base:6.2f}  {'met' if med['total_s'] <= GOAL_S else 'missed'}")
    return lines


def cost_lines(rows: dict[str, list[dict]]) -> list[str]:
    out = []
    for name, runs in rows.items():
        costs = next((c for r in runs for c in r["costs"].values() if c), None)
        if costs:
            top = sorted(costs.items(), key=lambda kv: -kv[1].get("max_s", 0))[:8]
            out.append(f"{name}: " + ", ".join(f"{k} {v.get('max_s', 0):.2f}/{v.get('total_s', 0):.2f} s"
                                               for k, v in top)
                       + "  (longest/total over ranks)")
    return out


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--ranks", type=int, default=8)
    p.add_argument("--culprit", type=int, default=5)
    p.add_argument("--repeat", type=int, default=3)
    p.add_argument("--repo", action="append", type=Path, help="checkout(s) to time (default: this one)")
    p.add_argument("--second-look", action="append", type=float, help="values to time (default: 3)")
    p.add_argument("--native", action="store_true", help="collect --native (native frames too)")
    p.add_argument("--pids", help="time on this already hung job (comma-separated pids) instead of starting one")
    p.add_argument("--json", type=Path)
    args = p.parse_args()
    repos = [r.resolve() for r in (args.repo or [REPO])]
    looks = args.second_look or [3.0]
    work = Path(tempfile.mkdtemp(prefix="bench-ttv-"))
    job = None
    if args.pids:
        pids = [int(x) for x in args.pids.split(",") if x.strip()]
    else:
        job = start_job(work / "job", args.ranks, "sleep", args.culprit)
        wait_for_hang(job, timeout=180)
        pids = [r.proc.pid for r in job.ranks]
    rows: dict[str, list[dict]] = {}
    try:
        for i in range(args.repeat):
            for repo in repos:
                for s in looks:
                    name = f"{repo.name or repo} --second-look {s:g}"
                    rows.setdefault(name, []).append(one_run(repo, pids, s, args.native,
                                                             work / f"b{i}-{len(rows)}-{s:g}"))
    finally:
        if job is not None:
            stop_job(job)
    lines = [f"{len(pids)} ranks ({'given pids' if args.pids else f'gloo, rank {args.culprit} sleeps'}), "
             f"{args.repeat} runs each, interleaved; {'native' if args.native else 'Python'} stacks"]
    lines += table(rows) + cost_lines(rows)
    lines += [f"verdict ({name}): {runs[-1]['verdict']}" for name, runs in rows.items()]
    print("\n".join(lines))
    if args.json:
        args.json.write_text(json.dumps({"rows": rows, "summary": lines}, indent=1, default=str) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
