"""CPU cost of the recorder per collective, against empty entry points (CPU, no GPU).

Builds nccl_patches/tests/microbench.c and runs, in one process and alternating (the order
rotates every repeat, so load and drift hit every variant alike):
  empty    do-nothing entry points: what calling a profiler costs NCCL anyway
  now      the recorder built from the working tree
  before   the recorder built from git ref --before, or from the sources staged in --before-dir
  chained  the recorder forwarding every call to a do-nothing second plugin (FORENSICS_RECORDER_CHAIN)
one collective = launch path (Group, Coll start/stop: 4 calls) + per channel the proxy path
(KernelCh, a send and a recv proxy op of 8 steps with their states: 89 calls). It does this at
1 and at --channels channels (the difference gives the cost per added channel), --runs times
(separate processes), and prints min and median ns added per collective, with their spread
over the runs. The machine's load is printed with them: on a shared machine the minimum is the
figure that means something (the quiet moments); the median says how loaded it was. It also
gives the CPU the recorder's own thread (heartbeat and event clock) takes per second, idle and
while events come, for now and before.

    python benchmarks/recorder_event_cost.py [--before main] [--runs 5] [--repeats 40] [--cpu 1]
    # where git has no history (the device): stage the baseline's sources first, carry them along
    python benchmarks/recorder_event_cost.py --stage-before af5ef16 .device/recorder-before
    python benchmarks/recorder_event_cost.py --before-dir .device/recorder-before --json "$OUT/event_cost.json"
    # where the time goes: builds without one piece, counts of clock reads and atomics, the machine's prices;
    # and the proxy path on a thread of its own (two quiet CPUs): nccl_patches/README.md, "Breakdown"
    python benchmarks/recorder_event_cost.py --before main --breakdown --two-threads 2,3 --cpu 4
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from forensics import recorder_build  # noqa: E402

GOAL_NS = 500.0  # issue 44: at most 0.5 us per collective of 1 channel, launch + proxy paths


def stage_ref(ref: str, dest: Path) -> Path:
    """The recorder's sources (nccl_patches/src and include) of git ref `ref`, written under dest."""
    listing = subprocess.run(["git", "-C", str(REPO), "ls-tree", "-r", "--name-only", ref, "nccl_patches/src",
                              "nccl_patches/include"], check=True, capture_output=True, text=True).stdout.split()
    for rel in listing:
        data = subprocess.run(["git", "-C", str(REPO), "show", f"{ref}:{rel}"], check=True, capture_output=True).stdout
        (dest / rel).parent.mkdir(parents=True, exist_ok=True)
        (dest / rel).write_bytes(data)
    (dest / "REF").write_text(subprocess.run(["git", "-C", str(REPO), "rev-parse", ref], check=True,
                                             capture_output=True, text=True).stdout)
    return dest


def build_from(src: Path, lib: Path, defines: tuple[str, ...] = ()) -> Path:
    """The plugin built from a source tree (src/nccl_patches/{src,include}), as the Makefile would; `defines`
    (-DREC_COUNT, -DREC_ABLATE_...) make a breakdown build (recorder_core.h says what each does)."""
    sources = [str(src / "nccl_patches/src" / n) for n in ("recorder_core.c", "profiler_plugin.c", "chain.c")
               if (src / "nccl_patches/src" / n).is_file()]
    if not sources:
        raise SystemExit(f"no recorder sources under {src}/nccl_patches/src")
    include = f"-I{src / 'nccl_patches/include'}"
    subprocess.run(["gcc", *recorder_build.CFLAGS, *defines, include, *sources, "-o", str(lib),
                    "-ldl"], check=True)
    return lib


def build_at_ref(ref: str, out: Path) -> Path:
    """The plugin built from the sources of git ref `ref` (a baseline to compare with)."""
    return build_from(stage_ref(ref, out / "src"), out / f"before-{ref.replace('/', '_')}.so")


def build_tools(tmp: Path) -> tuple[Path, Path]:
    """The microbenchmark and the do-nothing second plugin."""
    inc = REPO / "nccl_patches" / "include"
    tests = REPO / "nccl_patches" / "tests"
    exe, noop = tmp / "microbench", tmp / "libnccl-profiler-noop.so"
    subprocess.run(["gcc", "-O2", f"-I{inc}", str(tests / "microbench.c"), "-o", str(exe), "-ldl", "-pthread"],
                   check=True)
    subprocess.run(["gcc", "-O2", "-fPIC", "-shared", "-fvisibility=hidden", "-DCOUNT_NOOP", f"-I{inc}",
                    str(tests / "count_plugin.c"), "-o", str(noop)], check=True)
    return exe, noop


def one_run(exe: Path, variants: list[str], iterations: int, repeats: int, channels: int, cpu: int | str | None,
            state_dir: str, steps: int = 8, threads: int = 1) -> dict:
    """One microbench process; threads=2 runs the proxy path on a thread of its own (cpu: two CPUs, "2,3")."""
    # the same time per timing at any channel count
    cmd = [str(exe), str(max(1, iterations // channels)), str(repeats), str(channels), *variants]
    if cpu is not None and shutil.which("taskset"):
        cmd = ["taskset", "-c", str(cpu), *cmd]
    env = {"FORENSICS_RECORDER_DIR": state_dir, "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
           "FORENSICS_RECORDER_SNAPSHOT_ON_FINALIZE": "0", "MICROBENCH_STEPS": str(steps),
           "MICROBENCH_THREADS": str(threads), "MICROBENCH_PIPELINED": _pipelined()}
    out = subprocess.run(cmd, check=True, capture_output=True, text=True, env=env)
    return json.loads(out.stdout)["ns_per_collective"]


def _pipelined() -> str:
    """MICROBENCH_PIPELINED for the microbench ("1" under --pipelined, which sets it in this process)."""
    return os.environ.get("MICROBENCH_PIPELINED", "0")


def added(run: dict, label: str, stat: str, path: str = "whole") -> float:
    return run[label][path][stat] - run["empty"][path][stat]


def spread(values: list[float]) -> str:
    return f"{statistics.median(values):7.0f} ns  (runs: {min(values):.0f}..{max(values):.0f})"


def thread_cpu(exe: Path, variant: str, state_dir: str, busy: bool, seconds: float = 2.0) -> float | None:
    """Milliseconds of CPU per second taken by the recorder's own thread ('nccl-recorder': heartbeat and
    event clock), from /proc, while the microbenchmark records events (busy) or sleeps after init (idle)."""
    env = {"FORENSICS_RECORDER_DIR": state_dir, "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
           "FORENSICS_RECORDER_SNAPSHOT_ON_FINALIZE": "0", "MICROBENCH_IDLE": "0" if busy else "1"}
    proc = subprocess.Popen([str(exe), "20000", "1000", "1", variant], env=env, stdout=subprocess.DEVNULL)
    try:
        time.sleep(0.5)
        first, t0 = _recorder_thread_ns(proc.pid), time.monotonic()
        time.sleep(seconds)
        last, t1 = _recorder_thread_ns(proc.pid), time.monotonic()
    finally:
        proc.kill()
        proc.wait()
    if first is None or last is None:
        return None
    return (last - first) / 1e6 / (t1 - t0)


def _recorder_thread_ns(pid: int) -> int | None:
    """Nanoseconds on CPU of the process's 'nccl-recorder' thread (/proc/PID/task/TID/schedstat)."""
    for task in Path(f"/proc/{pid}/task").glob("*"):
        try:
            if (task / "comm").read_text().strip() == "nccl-recorder":
                return int((task / "schedstat").read_text().split()[0])
        except (OSError, ValueError, IndexError):
            continue
    return None


def report(runs: dict, one_step: list, labels: list[str], channels: int) -> None:
    """Per variant: ns added per collective, min and median over timings, median (range) over runs."""
    one = runs[1]
    calls = 4 + 89  # launch path + one channel's proxy path (tests/microbench.c)
    base = [r["empty"]["whole"]["min"] for r in one]
    print(f"empty entry points, 1 channel ({calls} calls): min {spread(base)} per collective")
    for label in labels:
        print(f"{label}: added per collective of 1 channel ({calls} calls)")
        print(f"   whole, min over timings:    {spread([added(r, label, 'min') for r in one])}")
        print(f"   whole, median of timings:   {spread([added(r, label, 'median') for r in one])}")
        print(f"   launch path alone, min:     {spread([added(r, label, 'min', 'launch') for r in one])}")
        per_ch = [(added(b, label, "min") - added(a, label, "min")) / (channels - 1)
                  for a, b in zip(one, runs[channels])]
        print(f"   per added channel, min:     {spread(per_ch)}")
        print(f"   1 channel, ops of 1 step:   {spread([added(r, label, 'min') for r in one_step])}  (23 calls)")
        per_step = [(added(a, label, "min") - added(b, label, "min")) / 14 for a, b in zip(one, one_step)]
        print(f"   per step (5 calls), min:    {spread(per_step)}")
    now_min = statistics.median(added(r, "now", "min") for r in one)
    print(f"goal: at most {GOAL_NS:.0f} ns per collective of 1 channel (min over timings, median of runs): "
          f"{now_min:.0f} ns, {'met' if now_min <= GOAL_NS else 'NOT met'}")
    if "before" in labels:
        ratios = [added(r, "now", "min") / max(added(r, "before", "min"), 1e-9) for r in one]
        span = f"runs {min(ratios):.2f}..{max(ratios):.2f}"
        print(f"now / before (added cost, min): {statistics.median(ratios):.2f} ({span})")


#: --breakdown: builds of the working tree with one piece taken out; now minus each is what that piece costs
#: (exact-spans: every one-step SendWait span timed, FORENSICS_RECORDER_SEND_WAIT_EVERY=1's cost: negative, what the
#: default's sampling of one span in 4 saves where send steps go one after another)
ABLATIONS = {"no-precise": "-DREC_ABLATE_PRECISE", "no-rmw": "-DREC_ABLATE_RMW", "no-touch": "-DREC_ABLATE_TOUCH",
             "vdso-precise": "-DREC_NO_COUNTER", "exact-spans": "-DREC_SEND_WAIT_EVERY_DEFAULT=1"}
COUNTED = ("precise", "tick", "coarse", "rmw")
BREAKDOWN_HELP = ("also time builds without the precise clock, the atomics, the header stamp, with every SendWait "
                  "span timed, and count clock reads and atomics per collective (now, and before when its sources "
                  "can count)")
TWO_THREADS_HELP = ("also time 1 channel with the proxy path on a second thread, as NCCL runs it, pinned to these two "
                    "CPUs (e.g. 2,3): what shared cache lines cost; needs two quiet CPUs")
PIPELINED_HELP = ("send steps in NCCL's order while the network is behind: each stopped after the next entered "
                  "SendWait (up to 8 on the network at once); default: each leaves SendWait before the next enters")


def machine_clock() -> str:
    """The kernel's clocksource and the counter's flags: what decides the price of a precise stamp."""
    try:
        source = Path("/sys/devices/system/clocksource/clocksource0/current_clocksource").read_text().strip()
    except OSError:
        source = "?"
    flags: set[str] = set()
    try:
        with open("/proc/cpuinfo", encoding="utf-8", errors="replace") as f:
            for line in f:
                if line.startswith("flags"):
                    flags = set(line.split(":", 1)[1].split())
                    break
    except OSError:
        pass
    wanted = ("constant_tsc", "nonstop_tsc", "tsc_known_freq", "hypervisor")
    return f"clocksource {source}; " + " ".join(f"{w}={'yes' if w in flags else 'no'}" for w in wanted)


def primitives(exe: Path, cpu: int | None) -> dict:
    """ns per call of clock reads, the counter and an atomic add on this machine (tests/microbench.c)."""
    cmd = [str(exe), "200000"]
    if cpu is not None and shutil.which("taskset"):
        cmd = ["taskset", "-c", str(cpu), *cmd]
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "MICROBENCH_PRIMITIVES": "1"}
    return json.loads(subprocess.run(cmd, check=True, capture_output=True, text=True, env=env).stdout)["ns_per_call"]


def counts(exe: Path, variants: list[str], channels: int, state_dir: str) -> dict:
    """Clock reads and atomic read-modify-writes of one collective, from the counting builds among `variants`."""
    env = {"FORENSICS_RECORDER_DIR": state_dir, "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
           "FORENSICS_RECORDER_SNAPSHOT_ON_FINALIZE": "0", "MICROBENCH_COUNT": "1",
           "MICROBENCH_PIPELINED": _pipelined()}
    out = subprocess.run([str(exe), "10", "1", str(channels), *variants], check=True, capture_output=True,
                         text=True, env=env)
    return json.loads(out.stdout)["counts"]


def _part(run: dict, label: str) -> float:
    """ns per collective the piece `label` leaves out costs in one run (min over timings)."""
    return added(run, "now", "min") - added(run, label, "min")


def breakdown_report(runs: dict, channels: int, counted: dict, prices: dict) -> None:
    """What each piece costs: now minus the build without it, per collective of 1 channel, launch path, per channel."""
    one = runs[1]
    print("breakdown (ns: now minus the build without the piece, or with precise stamps through the vDSO, or with "
          "every SendWait span timed (negative: what the counter, or the sampling, saves); min over timings, median "
          "of runs (range)):")
    for label, flag in ABLATIONS.items():
        whole = [_part(r, label) for r in one]
        launch = [added(r, "now", "min", "launch") - added(r, label, "min", "launch") for r in one]
        per_ch = [(_part(b, label) - _part(a, label)) / (channels - 1) for a, b in zip(one, runs[channels])]
        print(f"   {label:11s} ({flag}): 1 channel {spread(whole)}; launch {spread(launch)}; per added channel "
              f"{spread(per_ch)}")
    for nch, by_label in counted.items():
        for label, c in by_label.items():
            print(f"   {label} counted, {nch} channel(s): " + ", ".join(
                f"{k} {c['whole'][i]} (launch {c['launch'][i]})" for i, k in enumerate(COUNTED)))
    print("   prices, ns per call: " + ", ".join(f"{k} {v:.2f}" for k, v in prices.items()))


def baseline(args, tmp: Path) -> Path | None:
    """The 'before' plugin: from --before-dir (staged sources), else git ref --before, else none."""
    if args.before_dir:
        return build_from(args.before_dir, tmp / "before.so")
    return build_at_ref(args.before, tmp) if args.before else None


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--before", help="git ref to build a baseline recorder from (e.g. main)")
    ap.add_argument("--before-dir", type=Path, help="a baseline's sources staged by --stage-before (no git needed)")
    ap.add_argument("--stage-before", nargs=2, metavar=("REF", "DIR"), help="write REF's recorder sources to DIR, exit")
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--repeats", type=int, default=40, help="alternating timings per run and variant")
    ap.add_argument("--iterations", type=int, default=2000, help="collectives per timing")
    ap.add_argument("--channels", type=int, default=4, help="second channel count (the first is 1)")
    ap.add_argument("--cpu", type=int, default=None, help="pin to this CPU (taskset)")
    ap.add_argument("--json", type=Path, help="also write every run's numbers here")
    ap.add_argument("--two-threads", metavar="CPUS", help=TWO_THREADS_HELP)
    ap.add_argument("--breakdown", action="store_true", help=BREAKDOWN_HELP)
    ap.add_argument("--pipelined", action="store_true", help=PIPELINED_HELP)
    args = ap.parse_args()
    if args.pipelined:
        os.environ["MICROBENCH_PIPELINED"] = "1"
    if args.stage_before:
        print(stage_ref(args.stage_before[0], Path(args.stage_before[1])))
        return 0
    with tempfile.TemporaryDirectory() as tmp_s:
        tmp = Path(tmp_s)
        exe, noop = build_tools(tmp)
        plugin = recorder_build.build(force=False)
        chained_copy = tmp / "recorder-chained.so"  # the chain is set up at load: a second copy of the file
        shutil.copy(plugin, chained_copy)
        variants = [f"now={plugin}", f"chained={chained_copy}+{noop}"]
        before = baseline(args, tmp)
        if before is not None:
            variants.insert(0, f"before={before}")
        if args.breakdown:
            variants += [f"{k}={build_from(REPO, tmp / f'{k}.so', (d,))}" for k, d in ABLATIONS.items()]
        labels = [v.split("=", 1)[0] for v in variants]
        state = tempfile.mkdtemp(prefix="hf-bench-", dir=tmp)
        load_before = os.getloadavg()
        runs: dict[int, list] = {1: [], args.channels: []}
        one_step = []  # 1 channel, proxy ops of 1 step (a small message): what a latency-bound collective costs
        for _ in range(args.runs):
            for nch in runs:
                runs[nch].append(one_run(exe, variants, args.iterations, args.repeats, nch, args.cpu, state))
            one_step.append(one_run(exe, variants, args.iterations, args.repeats, 1, args.cpu, state, steps=1))
        pair = [v for v in variants if v.split("=", 1)[0] in ("before", "now")]
        two = [one_run(exe, pair, args.iterations, args.repeats, 1, args.two_threads, state, threads=2)
               for _ in range(args.runs if args.two_threads else 0)]
        load_after = os.getloadavg()
        counted, prices = {}, {}
        if args.breakdown:
            counting = [f"now={build_from(REPO, tmp / 'count-now.so', ('-DREC_COUNT',))}"]
            if before is not None:
                src = args.before_dir or tmp / "src"
                counting.append(f"before={build_from(src, tmp / 'count-before.so', ('-DREC_COUNT',))}")
            counted = {n: counts(exe, counting, n, state) for n in (1, args.channels)}
            prices = primitives(exe, args.cpu)
        threads = {f"{v.split('=', 1)[0]} {mode}": thread_cpu(exe, v, state, mode == "busy")
                   for v in variants if v.split("=", 1)[0] in ("before", "now") for mode in ("busy", "idle")}
    print(f"load average (1/5/15 min) before {load_before[0]:.1f}/{load_before[1]:.1f}/{load_before[2]:.1f}, "
          f"after {load_after[0]:.1f}/{load_after[1]:.1f}/{load_after[2]:.1f} on {os.cpu_count()} CPUs; "
          f"{args.runs} runs x {args.repeats} alternating timings x {args.iterations} collectives; send steps "
          f"{'pipelined (each stopped after the next entered SendWait)' if args.pipelined else 'one after another'}")
    print(machine_clock())
    report(runs, one_step, [x for x in labels if x not in ABLATIONS], args.channels)
    if two:
        for label in [x for x in ("before", "now") if x in labels]:
            mins, medians = [added(r, label, "min") for r in two], [added(r, label, "median") for r in two]
            print(f"two threads (launch | proxy, CPUs {args.two_threads}), 1 channel, {label}: added min "
                  f"{spread(mins)}, median {spread(medians)}")
    if args.breakdown:
        breakdown_report(runs, args.channels, counted, prices)
    print("recorder thread CPU, ms per second: " + ", ".join(
        f"{k} {v:.2f}" if v is not None else f"{k} ?" for k, v in threads.items()))
    if args.json:
        args.json.write_text(json.dumps({"runs": {str(k): v for k, v in runs.items()}, "one_step": one_step,
                                         "load": [load_before, load_after], "thread_ms_per_s": threads,
                                         "two_threads": two, "counts": counted, "prices": prices,
                                         "clock": machine_clock(),
                                         "before": str(args.before_dir or args.before or "")}, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
