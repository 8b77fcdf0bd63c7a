"""The recorder's cost on one GPU, and chaining on a real NCCL: one device call of at most 9 minutes, or the
cells split over several calls (--ops, --sizes, --skip-1rank, --skip-8) and their folders merged (`merge`).

  0. (--cpu-bench-before DIR) the CPU microbenchmark first, while the machine is quiet:
     benchmarks/recorder_event_cost.py, the baseline built from the sources staged in DIR against the
     working tree's recorder, alternating in one process (event_cost.txt / .json);
  1. layout "1 rank": a one-rank communicator (no network: NCCL's smallest latency, so the
     recorder's fixed cost shows), all_reduce, all_gather, send/recv, 8 B .. 256 MB. Groups of one
     rank (nccl_patches/device/bench_worker.py) stay up side by side, one without the recorder (base),
     one with it and a second one without (control: the A/A, the method's own floor), timed in turns, one
     short batch (--batch-s, 10 ms) a group a round, until the paired cost's and the A/A's spreads are under
     --target-spread (0.5 points), or the cell's cap (--cell-cap) or its share of the time left ends: the
     row's `stop` says resolved, cap or share, and table.md lists the cells that stopped unresolved;
  2. a DDP training step (6 x Linear(4096) MLP, batch 256) on the one-rank groups;
  3. layout "8 hosts": 8 ranks on the one GPU, each its own host (NCCL_HOSTID, sockets over lo,
     NCCL_IB_DISABLE=1, NCCL_NVLS_ENABLE=0: proxy ops and steps, the recorder's busiest path), the same
     ops and sizes, and the same method as the 1-rank layout (one code path, `latency_phase`): base,
     recorder and control groups of 8 ranks side by side, timed in turns, one batch (--hosts-batch-s,
     20 ms; a call longer than that is a batch of one, without warm-up calls) a group a round, the same
     estimator, stop rule, caps and raw rounds; not pinned (24 processes, 8 busy at a time). With --mps
     the layout runs under an MPS control daemon of its own (private pipe and log folders, quit at the
     phase's end, the GPU's settings untouched): the 8 kernels of a collective share the GPU at once. Without
     it they take turns in time slices, and the figures are the time slices' (2026-12-07: 54 ms for an 8 B
     all_reduce). Until 2026-12-07 this layout ran one group at a time in ABBA epochs, with the median and
     its MAD error: its rows have no paired figure, and `plan` leaves them out;
  4. chaining: tests/count_plugin.c alone, then behind the recorder (FORENSICS_RECORDER_CHAIN),
     8 ranks as 8 hosts running the same ops: its counts must be equal (when ~75 s are left).
Estimator (benchmarks/recorder_gpu_stats.py says why, from the recorded runs and a simulation): per round, the
recorder's batch against the same round's base batch (a drift between rounds cancels); the cost is the median of
those per-round differences, its spread the larger of a moving-block bootstrap's (blocks of sqrt(n) rounds) and
10 contiguous stretches' standard errors; each mode's latency the same way; the 20%-trimmed mean of the
differences beside it ("levels" in the table where the two part). The batch-to-batch scatter of the
launch-bound cells is a state a batch keeps (median 8.4% a batch in 74 ms batches, 7.4-11.7% in 20 ms ones; two
levels in all_gather), so short batches buy more rounds for the same time, and a cell runs at least 30 rounds
and --min-cell-s seconds before it may stop. The A/A's value, when beyond twice its spread, is an offset between
two processes that more rounds cannot remove: the table marks it "(offset)". One-rank groups run pinned to CPUs
of their own (--pin-cpus). Every round's batches are kept in the row (rounds_us), so the figures can be
recomputed: `recorder_gpu.py plan DIR` prints the rounds and seconds each cell of a finished run needs.
Everything is written to --out as it is measured (results.jsonl, one line per figure, a refined one
again; table.md rewritten after each; facts.json; chaining.json; logs.tar.gz): at most 8 files, so a
run cut short still hands back what it measured.

    # here: the baseline's sources, where the device can read them (/.device/ is git-ignored; carry it)
    python benchmarks/recorder_event_cost.py --stage-before af5ef16 .device/recorder-before
    # the device call (carry .device/recorder-before; ~500 s of the 540):
    timeout -k 10 525 python3 benchmarks/recorder_gpu.py --out "$OUT" --time-cap 480 --one-rank-share 0.22 \
        --train-s 30 --cpu-bench-before .device/recorder-before
    python benchmarks/recorder_gpu.py --dry-run --out /tmp/x   # CPU dry run (gloo + the fake-NCCL harness), ~2 min
    # split over calls (each its own $OUT, fetched to A, B, C), then one table:
    ... --skip-8 --skip-chain --skip-train --ops all_gather --one-rank-share 1     # call A
    ... --skip-8 --skip-chain --ops all_reduce,sendrecv --one-rank-share 1         # call B (+ DDP step)
    ... --skip-1rank                                                              # call C (8 hosts, chaining)
    ... --skip-1rank --skip-train --skip-chain --mps --cell-cap 12                # call D (8 hosts, MPS only)
    python benchmarks/recorder_gpu.py merge OUT A B C     # a cell in two calls: the later row, both listed
    python benchmarks/recorder_gpu.py plan A --cell-cap 60   # per cell: rounds and seconds to the target
Goals (issue 44): < 1% at >= 1 MB, < 3% below, < 0.5% of a training step.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import math
import os
import platform
import queue
import shutil
import socket
import subprocess
import sys
import tarfile
import tempfile
import threading
import time
from collections.abc import Iterator
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from benchmarks import recorder_gpu_stats as gpu_stats  # noqa: E402
from benchmarks.recorder_overhead import human  # noqa: E402
from forensics import recorder_build  # noqa: E402
from nccl_patches.harness import build_count_plugin, build_harness, run_harness  # noqa: E402
from parsers.readers.recorder import read_recorder_dir  # noqa: E402

WORKER = REPO / "nccl_patches" / "device" / "bench_worker.py"
SIZES = [8, 64, 512, 4 << 10, 32 << 10, 256 << 10, 1 << 20, 4 << 20, 16 << 20, 64 << 20, 256 << 20]
OPS = ["all_reduce", "all_gather", "sendrecv"]
#: seconds of one timed batch in the many-hosts layout (`--hosts-batch-s`)
HOSTS_BATCH_S = 0.02
COUNT_MASK = "0xf5f"  # Group Coll P2p ProxyOp ProxyStep KernelCh + the v5 API events; not ProxyCtrl (timing-made)


_STATE_ROOT: list[Path] = []


def state_root() -> Path:
    """Where the recorder's state files go: /dev/shm, as deployed (a file on disk would add page
    write-back the real thing never pays); one folder per run, removed at its end."""
    if not _STATE_ROOT:
        shm = "/dev/shm" if os.path.isdir("/dev/shm") and os.access("/dev/shm", os.W_OK) else None
        _STATE_ROOT.append(Path(tempfile.mkdtemp(prefix="hf-gpu-bench-", dir=shm)))
    return _STATE_ROOT[0]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class GroupDown(Exception):
    """A group stopped answering (a hung collective, a dead rank): it must be started again."""


class Group:
    """The ranks of one communicator, each a bench_worker reading commands on stdin."""

    def __init__(self, name: str, ranks: int, env_extra: dict[str, str], work: Path, backend: str) -> None:
        self.name, self.ranks, self.work = name, ranks, work
        self.procs: list[subprocess.Popen] = []
        self.lines: queue.Queue[str] = queue.Queue()
        port = free_port()
        logs = work / "logs"
        logs.mkdir(parents=True, exist_ok=True)
        for r in range(ranks):
            env = dict(os.environ)
            env.pop("NCCL_PROFILER_PLUGIN", None)
            env.update(RANK=str(r), WORLD_SIZE=str(ranks), LOCAL_RANK="0", MASTER_ADDR="127.0.0.1",
                       MASTER_PORT=str(port), NCCL_DEBUG="INFO", NCCL_DEBUG_SUBSYS="INIT,ENV",
                       NCCL_DEBUG_FILE=str(logs / f"nccl.{name}.{r}.%p.log"), PYTHONUNBUFFERED="1")
            if ranks > 1:  # every rank its own host: NET/Socket over lo, proxy ops and steps
                env.update(NCCL_HOSTID=f"{name}-host{r}", NCCL_SOCKET_IFNAME="lo", NCCL_IB_DISABLE="1",
                           NCCL_NVLS_ENABLE="0")
            env.update(env_extra)
            out = subprocess.PIPE if r == 0 else open(logs / f"{name}.{r}.out", "w")
            self.procs.append(subprocess.Popen([sys.executable, str(WORKER), "--backend", backend], env=env,
                                               stdin=subprocess.PIPE, stdout=out, stderr=subprocess.STDOUT,
                                               text=True, bufsize=1))
        threading.Thread(target=self._pump, daemon=True).start()

    def _pump(self) -> None:
        assert self.procs[0].stdout is not None
        for line in self.procs[0].stdout:
            self.lines.put(line.rstrip("\n"))
        self.lines.put("EOF")

    def expect(self, prefix: str, timeout: float) -> str:
        """The next line of rank 0 starting with prefix (others are its log lines)."""
        deadline = time.monotonic() + timeout
        while True:
            left = deadline - time.monotonic()
            try:
                line = self.lines.get(timeout=max(left, 0.01))
            except queue.Empty:
                raise GroupDown(f"{self.name}: no {prefix} in {timeout:.0f} s") from None
            if line == "EOF":
                raise GroupDown(f"{self.name}: rank 0 exited (see {self.work / 'logs'})")
            if line.startswith(prefix):
                return line[len(prefix):].strip()

    def ask(self, cmd: dict, timeout: float) -> dict:
        text = json.dumps(cmd) + "\n"
        for p in self.procs:
            assert p.stdin is not None
            try:
                p.stdin.write(text)
                p.stdin.flush()
            except (BrokenPipeError, OSError) as err:
                raise GroupDown(f"{self.name}: a rank is gone ({err})") from None
        return json.loads(self.expect("RESULT", timeout))

    def quit(self, timeout: float = 60) -> None:
        for p in self.procs:
            try:
                assert p.stdin is not None
                p.stdin.write('{"cmd": "quit"}\n')
                p.stdin.close()
            except (BrokenPipeError, OSError):
                pass
        deadline = time.monotonic() + timeout
        for p in self.procs:
            try:
                p.wait(timeout=max(1.0, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()


def rotation(rounds: int, modes: list[str]) -> list[str]:
    """The order of one round: each mode leads, follows and sits in the middle alike, forwards then backwards."""
    k = rounds % len(modes)
    order = modes[k:] + modes[:k]
    return order if (rounds // len(modes)) % 2 == 0 else order[::-1]


def alternate(groups: dict, cmd: dict, budget_s: float, target: float, patience: float = 60,
              latency_too: bool = False, min_s: float = 0.0) -> dict:
    """Time cmd in each group by turns, one batch a group a round, until `gpu_stats.resolved` says every paired
    figure's spread is under `target` (or the budget ends: stop "budget"). The spread is looked at after
    MIN_ROUNDS rounds and min_s seconds (a state lasting a second must come and go a few times before a
    spread can see it), then after every 15% more rounds. The row keeps every round's batches (us a call)."""
    samples: dict[str, list[float]] = {m: [] for m in groups}
    modes = list(groups)
    start, rounds, check, stop = time.monotonic(), 0, gpu_stats.MIN_ROUNDS, "budget"
    while True:
        for m in rotation(rounds, modes):
            res = groups[m].ask(cmd, timeout=max(patience, budget_s * 2))
            if "error" in res:
                return {"error": res["error"]}
            samples[m].append(res["sec"])
        rounds += 1
        if rounds >= check and time.monotonic() - start >= min_s:
            check = gpu_stats.next_check(rounds)
            if gpu_stats.resolved(samples, target, latency_too):
                stop = "resolved"
                break
        if time.monotonic() - start >= budget_s and rounds >= 3:
            break
    return summarize(samples, stop, time.monotonic() - start)


def summarize(samples: dict[str, list[float]], stop: str, seconds: float) -> dict:
    """A cell's figures from its rounds (`gpu_stats.latency_figure` a mode, `gpu_stats.paired_figure` against the
    base), why it stopped, and the raw rounds."""
    out: dict = {m: gpu_stats.latency_figure(v) for m, v in samples.items()}
    out["paired"] = {m: gpu_stats.paired_figure(samples["base"], v) for m, v in samples.items() if m != "base"}
    out["stop"], out["seconds"] = stop, round(seconds, 1)
    out["rounds_us"] = {m: [round(v * 1e6, 4) for v in vals] for m, vals in samples.items()}
    return out


def iterations(groups: dict, cmd: dict, batch_s: float, cap: int, patience: float) -> tuple[int, float]:
    """Calls per batch so one batch lasts about batch_s (probed on the base group), and one call's seconds.
    The other groups run the cell once too: buffers allocated and connections made before any batch is timed
    (a batch of one call has no warm-up of its own, `batch_warm`)."""
    probe = groups["base"].ask({**cmd, "iters": 3, "warm": 2}, timeout=patience)
    if "error" in probe:
        raise RuntimeError(probe["error"])
    for m, g in groups.items():
        if m != "base":
            g.ask({**cmd, "iters": 1, "warm": 1}, timeout=patience)
    return max(1, min(cap, int(batch_s / max(probe["sec"], 1e-7)))), probe["sec"]


def batch_warm(calls: int) -> int:
    """Untimed calls before each timed batch: 2 where a batch is many short calls (a group idle while the others
    ran wakes up on them), none where one call is longer than a batch (64-256 MB over sockets: 0.1-1 s a call,
    where two more would triple a round and a wake-up of microseconds does not show; `iterations` warmed it)."""
    return 2 if calls > 1 else 0


class Report:
    """results.jsonl (append as measured) and table.md (rewritten) in the output folder."""

    def __init__(self, out: Path, header: dict) -> None:
        self.out, self.header, self.rows = out, header, []
        out.mkdir(parents=True, exist_ok=True)
        (out / "facts.json").write_text(json.dumps(header, indent=1) + "\n")

    def add(self, row: dict) -> None:
        self.rows.append(row)
        self._written(row)

    def put(self, row: dict) -> None:
        """Adds row, or replaces the row of the same cell (a figure refined epoch after epoch)."""
        key = (row["layout"], row["what"], row.get("bytes"))
        self.rows = [r for r in self.rows if (r["layout"], r["what"], r.get("bytes")) != key] + [row]
        self._written(row)

    def _written(self, row: dict) -> None:
        with open(self.out / "results.jsonl", "a") as f:  # a refined cell's later line supersedes the earlier
            f.write(json.dumps(row) + "\n")
        (self.out / "table.md").write_text(self.table())
        print(self.line(row), flush=True)

    @staticmethod
    def line(r: dict) -> str:
        if "error" in r:
            return f"{r['layout']:>8} {r['what']:>10} {human(r.get('bytes', 0)):>6}  error: {r['error']}"
        b, c = r["base"], r["recorder"]
        cost, sp = mcost, msp = versus(b, c)
        if "recorder" in r.get("paired", {}):  # the verdict on the paired rounds: a drift between rounds cancels
            cost, sp = r["paired"]["recorder"]["pct"], r["paired"]["recorder"]["spread"]
        goal = r["goal_pct"]
        verdict = "met" if cost <= goal else ("within spread" if cost - sp <= goal else "OVER")
        if not math.isfinite(sp):  # too few rounds for a spread: the figure says nothing yet
            verdict = "no spread"
        aa = "-"
        if "control" in r:  # a second group without the recorder (or the base's later epochs): the method's floor
            a_cost, a_sp = versus(r.get("control_of", b), r["control"])
            aa = f"{a_cost:+.2f}% ± {a_sp:.2f}"
        pair = {m: f"{v['pct']:+.2f}% ± {v['spread']:.2f}" for m, v in r.get("paired", {}).items()}
        aa_pair = r.get("paired", {}).get("control")
        if aa_pair and abs(aa_pair["pct"]) > 2 * aa_pair["spread"]:  # two processes apart beyond their spread
            pair["control"] += " (offset)"
        for m, v in r.get("paired", {}).items():  # the average round parts from the median one
            if "tmean_pct" in v and gpu_stats.levels_apart(v):
                pair[m] += f" (levels: mean {v['tmean_pct']:+.2f} ± {v['tmean_spread']:.2f})"
        return (f"| {r['layout']} | {r['what']} | {human(r.get('bytes', 0)) if r.get('bytes') else '-'} | "
                f"{level(b)} | {level(c)} | {mcost:+.2f}% ± {msp:.2f} | {pair.get('recorder', '-')} | {aa} | "
                f"{pair.get('control', '-')} | {b['n']}+{c['n']} x {r['per_batch']} | {r.get('stop', '-')} | "
                f"< {goal:g}% {verdict} |")

    def table(self) -> str:
        h = self.header
        lines = [f"# recorder cost on one GPU ({h.get('gpu')}, NCCL {h.get('nccl')}, torch {h.get('torch')}, "
                 f"Python {h.get('python')}, {h.get('cpus')} CPUs, backend {h.get('backend')})", "",
                 "| layout | what | size | base us | recorder us | cost (medians) | cost (paired rounds) | "
                 "A/A (2nd base) | A/A (paired) | batches x calls | stop | goal |",
                 "|---|---|---|---|---|---|---|---|---|---|---|---|"]
        lines += [self.line(r) for r in self.rows]
        stopped: dict[str, list[str]] = {}  # per layout: both layouts have the same cells
        for r in self.rows:
            if r.get("stop") in ("cap", "share"):
                cell = f"{r['what']} {human(r['bytes']) if r.get('bytes') else ''}".strip()
                stopped.setdefault(r["layout"], []).append(cell)
        if stopped:
            named = "; ".join(", ".join(c) if len(stopped) == 1 else f"{lay}: {', '.join(c)}"
                              for lay, c in stopped.items())
            lines += ["", f"Stopped at their time cap or share, spread not under {h.get('target_spread_pct')}: {named}"]
        return "\n".join(lines) + "\n"


def level(fig: dict) -> str:
    """One mode's latency for the table: its median ± spread."""
    return f"{fig['median_us']:.2f} ± {fig['spread_pct']:.2f}%"


def versus(base: dict, other: dict) -> tuple[float, float]:
    """other's median against base's, in %, and the spread of that difference (both spreads combined)."""
    key = "median_us"
    return ((other[key] / base[key] - 1) * 100,
            (base["spread_pct"] ** 2 + other["spread_pct"] ** 2) ** 0.5)


def env_for(mode: str, plugin: Path, state: Path, chain: Path | None = None) -> dict[str, str]:
    if mode in ("base", "control"):
        return {}
    env = {"NCCL_PROFILER_PLUGIN": str(plugin), "FORENSICS_RECORDER_DIR": str(state), "FORENSICS_RECORDER_KEEP": "1"}
    if chain is not None:
        env["FORENSICS_RECORDER_CHAIN"] = str(chain)
    return env


def recorder_facts(group: Group, state: Path) -> dict:
    """Proof the recorder ran: its INFO lines in the NCCL logs and what its state files hold."""
    logs = "".join(p.read_text(errors="replace") for p in (group.work / "logs").glob(f"nccl.{group.name}.*.log"))
    states, problems = read_recorder_dir(state) if state.is_dir() else ([], ["no state dir"])
    return {"group": group.name, "loaded_lines": logs.count("hang-forensics recorder (profiler v"),
            "chained_lines": logs.count("hang-forensics recorder chains"),
            "nccl_version": next((ln.split("NCCL version", 1)[1].strip() for ln in logs.splitlines()
                                  if "NCCL version" in ln), "?"),
            "state_files": len(states), "ops_recorded": sum(s.coll_next for s in states),
            "proxy_ops": sum(s.proxy_next for s in states), "dropped_proxy": sum(s.dropped_proxy for s in states),
            "problems": problems[:5]}


class Layout:
    """The groups of one layout (base, recorder, maybe a control), side by side and timed in turns, started
    again when one goes down. Both layouts, one rank and many hosts, are this: the same cells, rounds,
    estimator and stop rule (`alternate`); they differ in ranks, batch length, patience and CPU pinning."""

    def __init__(self, name: str, ranks: int, args, plugin: Path, work: Path) -> None:
        self.name, self.ranks, self.args, self.plugin, self.work = name, ranks, args, plugin, work
        self.state = state_root() / f"state-{''.join(c for c in name if c.isalnum())}"
        self.modes = ("base", "recorder", "control") if args.control else ("base", "recorder")
        # seconds to wait for an answer before calling the group hung (one rank answers fast; a call that
        # never returns, say a send to oneself that torch or NCCL cannot do, must not eat the run)
        self.patience = 30.0 if ranks == 1 else 120.0
        # a round of 8 ranks pays a barrier over sockets and 8 answers: its batches are longer
        self.batch_s = args.batch_s if ranks == 1 else args.hosts_batch_s
        self.starts = 0
        self.groups: dict[str, Group] = {}
        self.start()

    def start(self) -> None:
        self.starts += 1
        tag = f"{self.ranks}" if self.starts == 1 else f"{self.ranks}.{self.starts}"
        self.groups = {m: Group(f"{m}-{tag}", self.ranks, {**env_for(m, self.plugin, self.state), **self.pin(i)},
                                self.work, self.args.backend) for i, m in enumerate(self.modes)}
        try:
            for g in self.groups.values():
                g.expect("READY", timeout=240)
        except GroupDown:  # no rank left behind (under --mps, a client left alive would hold the daemon's quit)
            self.stop()
            raise

    def pin(self, index: int) -> dict[str, str]:
        """The index-th group's own CPUs (--pin-cpus per group, after CPUs 0-1 left to this driver), for
        one-rank groups that run side by side; none where the machine has too few or --pin-cpus is 0."""
        width = self.args.pin_cpus
        first = 2 + ((index + self.args.pin_rotate) % len(self.modes)) * width
        if self.ranks != 1 or width <= 0 or first + width > (os.cpu_count() or 1):
            return {}
        return {"HF_BENCH_CPUS": ",".join(str(c) for c in range(first, first + width))}

    def stop(self) -> None:
        for g in self.groups.values():
            g.quit(timeout=30)


def run_cell(rep: Report, lay: Layout, op: str, nbytes: int, share: float) -> None:
    """One figure: calls per batch from a probe, then the groups by turns until it resolves, its time cap
    (--cell-cap) or its share of the layout's time left ends; the row's stop says which."""
    args = lay.args
    cmd = {"cmd": "op", "op": op, "bytes": nbytes, "warm": 2}
    try:
        n, one = iterations(lay.groups, cmd, lay.batch_s, 20000, lay.patience)
    except RuntimeError as err:  # the worker answered with an error (an op this layout cannot do)
        rep.add({"layout": lay.name, "what": op, "bytes": nbytes, "error": str(err)})
        return
    budget = min(share, args.cell_cap)
    if one * n * len(lay.modes) * 3 > budget * 1.5 and not args.dry_run:  # three rounds would not fit its share
        rep.add({"layout": lay.name, "what": op, "bytes": nbytes,
                 "error": f"skipped: one call takes {one * 1e3:.1f} ms, the cell's share is {budget:.1f} s"})
        return
    res = alternate(lay.groups, {**cmd, "iters": n, "warm": batch_warm(n)}, budget, args.target_spread,
                    lay.patience, args.latency_too, min(args.min_cell_s, budget / 2))
    if res.get("stop") == "budget":
        res["stop"] = "cap" if budget == args.cell_cap else "share"
    goal = 1.0 if nbytes >= 1 << 20 else 3.0
    rep.add({"layout": lay.name, "what": op, "bytes": nbytes, "per_batch": n, "goal_pct": goal, **res})


def latency_phase(rep: Report, layout: str, ranks: int, args, plugin: Path, work: Path, measure_s: float,
                  hard_end: float) -> None:
    """All ops x sizes in one layout, for measure_s seconds once the groups are up (never past hard_end).
    A group that stops answering is started again, and its op is left out of the rest of the layout."""
    lay = Layout(layout, ranks, args, plugin, work)
    broken: set[str] = set()
    try:
        train = ranks == 1 and not args.skip_train
        # the DDP step's time is kept out of the cells' (it used to get what they left: 5 s when they took all)
        deadline = min(time.monotonic() + measure_s, hard_end) - (args.train_s if train else 0)
        cells = [(op, b) for b in args.sizes for op in args.ops]  # by size: a cut run loses the largest sizes
        for i, (op, nbytes) in enumerate(cells):
            left = deadline - time.monotonic()
            if op in broken or (left < 3 and not args.dry_run):  # a dry run runs every cell, briefly
                why = "skipped: it hung or failed earlier in this layout" if op in broken else "time cap reached"
                rep.add({"layout": layout, "what": op, "bytes": nbytes, "error": why})
                continue
            try:
                run_cell(rep, lay, op, nbytes, max(left, 0.1) / (len(cells) - i))
            except GroupDown as err:
                rep.add({"layout": layout, "what": op, "bytes": nbytes, "error": f"group down: {err}"})
                broken.add(op)
                lay.stop()
                if hard_end - time.monotonic() < 60:
                    return
                lay.start()
        if train:
            try:
                train_cell(rep, lay.groups, args, min(time.monotonic() + args.train_s, hard_end))
            except GroupDown as err:
                rep.add({"layout": layout, "what": "DDP step", "error": f"group down: {err}"})
    finally:
        lay.stop()
        facts = recorder_facts(lay.groups["recorder"], lay.state)
        print(f"recorder in the {layout} run: {json.dumps(facts)}", flush=True)
        rep.header.setdefault("recorder", []).append(facts)
        (rep.out / "facts.json").write_text(json.dumps(rep.header, indent=1) + "\n")


@contextlib.contextmanager
def private_mps(work: Path, wanted: bool) -> Iterator[str]:
    """An MPS control daemon of this run's own (its pipe and log folders under work), so that the 8 ranks'
    kernels share the GPU at once instead of taking turns in time slices: only processes started with these
    CUDA_MPS_* variables reach it, and it quits when the phase ends. The GPU's own settings (compute mode,
    MIG) are not touched. Yields what it did, for the report."""
    tool = shutil.which("nvidia-cuda-mps-control")
    if not wanted or tool is None:
        yield "no MPS (not asked)" if not wanted else "no MPS (nvidia-cuda-mps-control not found)"
        return
    dirs = {"CUDA_MPS_PIPE_DIRECTORY": str(work / "mps-pipe"), "CUDA_MPS_LOG_DIRECTORY": str(work / "mps-log")}
    for d in dirs.values():
        Path(d).mkdir(parents=True, exist_ok=True)
    env = {**os.environ, **dirs}
    started = subprocess.run([tool, "-d"], env=env, capture_output=True, text=True, timeout=30)
    if started.returncode != 0:
        yield f"no MPS (the daemon did not start: {started.stderr.strip()[:200]})"
        return
    os.environ.update(dirs)
    try:
        yield f"MPS: a private control daemon ({dirs['CUDA_MPS_PIPE_DIRECTORY']})"
    finally:
        for k in dirs:
            os.environ.pop(k, None)
        subprocess.run([tool], input="quit\n", env=env, capture_output=True, text=True, timeout=60)


def hosts_layout(rep: Report, args, plugin: Path, work: Path, hard_end: float) -> None:
    """The many-hosts layout, under a private MPS daemon when --mps asks for one. On NCCL, a run that asked for
    MPS and cannot have it leaves the layout out (a phase error says why) rather than spend its device time on
    the time slices' figures, which 2026-12-07 measured already; the gloo dry run goes on without it."""
    with private_mps(work, args.mps) as how:
        rep.header["hosts_layout_gpu_sharing"] = how
        print(how, flush=True)
        if args.mps and not how.startswith("MPS") and args.backend == "nccl":
            rep.header.setdefault("phase_errors", {})["hosts"] = f"--mps asked, layout left out: {how}"
            (rep.out / "facts.json").write_text(json.dumps(rep.header, indent=1) + "\n")
            return
        layout = f"{args.hosts} hosts" + (" (MPS)" if how.startswith("MPS") else "")
        guarded(rep, "hosts", latency_phase, rep, layout, args.hosts, args, plugin, work, math.inf, hard_end)


def train_cell(rep: Report, groups: dict, args, deadline: float) -> None:
    cmd = {"cmd": "train", "warm": 3}
    probe = groups["base"].ask({**cmd, "steps": 2}, timeout=300)
    for g in groups.values():  # every model built and warm before timing
        g.ask({**cmd, "steps": 2}, timeout=300)
    if "error" in probe:
        rep.add({"layout": "1 rank", "what": "DDP step", "error": probe["error"]})
        return
    n = max(2, int(0.1 / max(probe["sec"], 1e-6)))  # 0.1 s batches: 30 rounds of 3 in ~10 s (GPU-bound: 0.02-0.05%)
    res = alternate(groups, {**cmd, "steps": n}, max(5.0, deadline - time.monotonic()), args.target_spread,
                    300, args.latency_too)
    if res.get("stop") == "budget":  # its time is --train-s: a cap
        res["stop"] = "cap"
    rep.add({"layout": "1 rank", "what": "DDP step", "per_batch": n, "goal_pct": 0.5, **res})


def count_rows(path: Path) -> dict:
    """The count plugin's lines keyed by (rank, comm index), without what differs per run."""
    rows = {}
    for line in path.read_text().splitlines() if path.is_file() else []:
        r = json.loads(line)
        rows[(r["rank"], r["index"])] = {k: r.get(k) for k in ("start", "stop", "state", "bad_parent", "bad_handle",
                                                                 "open", "finalized")}
    return rows


def compare_counts(alone: dict, chained: dict) -> dict:
    same = alone == chained and bool(alone)
    diffs = [f"{k}: alone {alone.get(k)} chained {chained.get(k)}" for k in sorted(set(alone) | set(chained), key=str)
             if alone.get(k) != chained.get(k)]
    total = {kind: sum(sum(v[kind].values()) for v in alone.values()) for kind in ("start", "stop", "state")}
    return {"equal": same, "communicators": len(alone), "events_alone": total, "differences": diffs[:10]}


def chain_phase(rep: Report, args, plugin: Path, work: Path) -> None:
    """The count plugin alone, then chained behind the recorder: the same ops, equal counts."""
    counter = build_count_plugin(work)
    if args.backend != "nccl":  # CPU dry run: the fake-NCCL harness drives both, same comparison
        harness = build_harness(work)
        outs = {}
        for mode in ("alone", "chained"):
            out = work / f"count-{mode}.jsonl"
            env = {"HARNESS_HONOR_MASK": "1", "COUNT_PLUGIN_MASK": "0x5f", "COUNT_PLUGIN_OUT": str(out),
                   "FORENSICS_RECORDER_DIR": str(work / "state-chain")}
            (work / "state-chain").mkdir(exist_ok=True)
            if mode == "chained":
                env["FORENSICS_RECORDER_CHAIN"] = str(counter)
            lib = counter if mode == "alone" else plugin
            done = run_harness(harness, lib, 5, ["run", "2", "40", "2", "4"], env)
            outs[mode] = count_rows(out) if done.returncode == 0 else {}
        result = {"driver": "fake-NCCL harness (CPU dry run)", **compare_counts(outs["alone"], outs["chained"])}
    else:
        result = {"driver": f"real NCCL, {args.hosts} ranks as {args.hosts} hosts",
                  **chain_on_nccl(counter, plugin, work, args.hosts)}
    rep.header["chaining"] = result
    (rep.out / "facts.json").write_text(json.dumps(rep.header, indent=1) + "\n")
    (rep.out / "chaining.json").write_text(json.dumps(result, indent=1) + "\n")
    print(f"chaining: {'EQUAL' if result['equal'] else 'DIFFERENT'} counts: {json.dumps(result)[:600]}", flush=True)


def chain_on_nccl(counter: Path, plugin: Path, work: Path, hosts: int) -> dict:
    outs, facts = {}, {}
    for mode in ("alone", "chained"):
        out, state = work / f"count-{mode}.jsonl", state_root() / f"state-chain-{mode}"
        env = {"COUNT_PLUGIN_MASK": COUNT_MASK, "COUNT_PLUGIN_OUT": str(out)}
        env.update({"NCCL_PROFILER_PLUGIN": str(counter)} if mode == "alone"
                   else env_for("recorder", plugin, state, counter))
        g = Group(f"chain-{mode}", hosts, env, work, "nccl")
        try:
            g.expect("READY", timeout=240)
            res = g.ask({"cmd": "seq"}, timeout=240)
        finally:
            g.quit()
        outs[mode] = count_rows(out)
        facts[mode] = {"seq": res, **(recorder_facts(g, state) if mode == "chained" else {})}
    return {**compare_counts(outs["alone"], outs["chained"]), "runs": facts,
            "step_order": step_order(work / "count-alone.jsonl")}


def step_order(path: Path) -> dict:
    """How real NCCL ran its sends' steps in the count plugin's run without the recorder (timing-made, so not
    compared): per log2 of a send op's bytes, its ops, those of two steps or more, and those whose steps were in
    SendWait together (the recorder's cheaper "pipelined" order) against one after another."""
    total: dict[str, dict[str, int]] = {}
    for line in path.read_text().splitlines() if path.is_file() else []:
        for kind, buckets in json.loads(line).get("overlap", {}).items():
            for bucket, n in buckets.items():
                total.setdefault(f"2^{bucket} B", {}).setdefault(kind, 0)
                total[f"2^{bucket} B"][kind] += n
    return dict(sorted(total.items(), key=lambda kv: int(kv[0][2:-2])))


def keep_logs(work: Path, out: Path) -> None:
    """Rank 0's NCCL log of each recorder group and of the chained run (the loaded/chained lines as NCCL
    wrote them), packed into one logs.tar.gz: the device hands back at most 8 files from $OUT."""
    with tarfile.open(out / "logs.tar.gz", "w:gz") as tar:
        for pattern in ("nccl.recorder-*.0.*.log", "nccl.chain-*.0.*.log", "*.1.out"):
            for p in sorted((work / "logs").glob(pattern))[:6]:
                data = p.read_bytes()[-200_000:]
                info = tarfile.TarInfo(f"logs/{p.name}")
                info.size = len(data)
                tar.addfile(info, io.BytesIO(data))


def cpu_bench(out: Path, before_dir: Path, quick: bool) -> None:
    """The CPU microbenchmark (benchmarks/recorder_event_cost.py) before the GPU runs, while the machine is
    quiet: the baseline built from the staged sources in before_dir, the working tree's recorder, alternating
    in one process pinned to one CPU, 7 runs (~40 s on 16 cores, twice that with the breakdown; `quick`: 1 run,
    for the dry run), with the breakdown (which piece costs what, clock reads and atomics counted) and, where
    there are 6 CPUs or more, the proxy path on a second thread (CPUs 4 and 5)."""
    runs, repeats = ("1", "5") if quick else ("7", "40")
    cpus = os.cpu_count() or 1
    cmd = [sys.executable, str(REPO / "benchmarks" / "recorder_event_cost.py"), "--before-dir", str(before_dir),
           "--runs", runs, "--repeats", repeats, "--cpu", "2" if cpus > 2 else "0", "--breakdown",
           *(["--two-threads", "4,5"] if cpus >= 6 else []), "--json", str(out / "event_cost.json")]
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=240)
    (out / "event_cost.txt").write_text(f"$ {' '.join(cmd)}\nrc {done.returncode}\n{done.stdout}{done.stderr[-4000:]}")
    print(done.stdout[-3000:] or done.stderr[-2000:], flush=True)


def guarded(rep: Report, name: str, phase, *args) -> None:
    """Runs one phase; a failure is written down and the next phase still runs."""
    try:
        phase(*args)
    except Exception as err:  # a broken phase must not cost the phases after it
        rep.header.setdefault("phase_errors", {})[name] = f"{type(err).__name__}: {err}"[:1000]
        (rep.out / "facts.json").write_text(json.dumps(rep.header, indent=1) + "\n")
        print(f"phase {name} failed: {type(err).__name__}: {err}", flush=True)


def header(args) -> dict:
    h = {"backend": args.backend, "python": platform.python_version(), "cpus": os.cpu_count(),
         "host": socket.gethostname(), "started": time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime()),
         "load_avg_start": os.getloadavg(), "sizes": args.sizes, "ops": args.ops,
         "target_spread_pct": args.target_spread, "cell_cap_s": args.cell_cap, "batch_s": args.batch_s,
         "hosts_batch_s": args.hosts_batch_s, "min_cell_s": args.min_cell_s,
         "argv": sys.argv[1:]}
    try:
        import torch

        h["torch"] = torch.__version__
        h["nccl"] = ".".join(map(str, torch.cuda.nccl.version())) if torch.cuda.is_available() else "-"
        h["gpu"] = torch.cuda.get_device_name(0) if torch.cuda.is_available() else "none (CPU)"
    except Exception as err:  # the header must not stop the run
        h["torch"] = f"? ({err})"
    return h


def main() -> int:
    if len(sys.argv) > 1 and sys.argv[1] in ("merge", "plan"):
        return offline(sys.argv[1:])
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", type=Path, default=Path(os.environ.get("OUT", "recorder-gpu-out")))
    ap.add_argument("--backend", default="nccl", help="gloo: CPU dry run (no NCCL, so no recorder cost)")
    ap.add_argument("--time-cap", type=float, default=450, help="seconds for the whole run (phases share it)")
    ap.add_argument("--target-spread", type=float, default=0.5, help="%% spread of each median to stop at")
    ap.add_argument("--sizes", default=",".join(map(str, SIZES)))
    ap.add_argument("--train-s", type=float, default=40, help="seconds for the training-step figure")
    ap.add_argument("--skip-train", action="store_true")
    ap.add_argument("--no-control", dest="control", action="store_false",
                    help="no second base group (in either layout; it measures the method's A/A floor)")
    ap.add_argument("--batch-s", type=float, default=0.01,
                    help="seconds of one timed batch (1-rank layout): short, since a batch's scatter does not "
                         "shrink with its length (recorder_gpu_stats's docstring)")
    ap.add_argument("--cell-cap", type=float, default=60,
                    help="seconds at most for one cell (either layout); a cell that stops there is marked 'cap'")
    ap.add_argument("--min-cell-s", type=float, default=5,
                    help="seconds a cell runs at least before it may stop resolved")
    ap.add_argument("--latency-too", action="store_true",
                    help="a cell stops only when each mode's latency is resolved too, not only the paired figures")
    ap.add_argument("--ops", default=",".join(OPS),
                    help="ops to measure (with --sizes, the cells of this call; '' for none: the DDP step alone)")
    ap.add_argument("--skip-1rank", action="store_true", help="leave out the 1-rank layout and the DDP step")
    ap.add_argument("--pin-cpus", type=int, default=2,
                    help="CPUs of its own for each one-rank group (0: no pinning); the driver keeps CPUs 0-1")
    ap.add_argument("--pin-rotate", type=int, default=0,
                    help="give the i-th mode the CPUs of mode i+N (base, recorder, control): another call with "
                         "another N tells an offset that follows the CPUs from one that follows the process")
    ap.add_argument("--one-rank-share", type=float, default=0.30, help="share of the cap for the 1-rank layout")
    ap.add_argument("--dry-run", action="store_true",
                    help="CPU dry run: gloo, 8 B, 2 hosts, every cell briefly (the same code path, no GPU)")
    ap.add_argument("--hosts", type=int, default=8, help="ranks of the many-hosts layout (the dry run uses 2)")
    ap.add_argument("--skip-8", action="store_true", help="leave out the many-hosts layout")
    ap.add_argument("--mps", action="store_true",
                    help="run the many-hosts layout under an MPS daemon of its own (kernels share the GPU at once)")
    ap.add_argument("--hosts-batch-s", type=float, default=HOSTS_BATCH_S,
                    help="seconds of one timed batch in the many-hosts layout (a round there also pays a barrier "
                         "over sockets and 8 ranks' answers)")
    ap.add_argument("--skip-chain", action="store_true", help="leave out the chaining check on real NCCL")
    ap.add_argument("--cpu-bench-before", type=Path,
                    help="first run the CPU microbenchmark against the baseline sources staged here "
                         "(recorder_event_cost.py --stage-before REF DIR)")
    args = ap.parse_args()
    if args.dry_run:
        args.backend, args.sizes, args.hosts, args.time_cap, args.train_s, args.one_rank_share = (
            "gloo", "8", 2, 30, 1, 0.05)
    args.sizes = [int(s) for s in str(args.sizes).split(",") if s]
    args.ops = [op for op in str(args.ops).split(",") if op]
    unknown = [op for op in args.ops if op not in OPS]
    if unknown:
        ap.error(f"unknown ops {unknown}: choose from {OPS}")
    t0 = time.monotonic()
    rep = Report(args.out, header(args))
    work = Path(tempfile.mkdtemp(prefix="hf-gpu-bench-"))
    plugin = recorder_build.build()
    print(f"plugin {plugin}; work {work}; out {args.out}", flush=True)
    cap = t0 + args.time_cap
    if args.cpu_bench_before:
        guarded(rep, "cpu bench", cpu_bench, args.out, args.cpu_bench_before, args.dry_run)
    # the 1-rank layout (+ training) takes one_rank_share of the cap, the many-hosts layout the rest but
    # what chaining needs (~70 s on the H100: two 8-rank groups), chaining the end
    chain_s = 0 if args.skip_chain or args.dry_run else 75
    if not args.skip_1rank:
        guarded(rep, "1 rank", latency_phase, rep, "1 rank", 1, args, plugin, work,
                args.one_rank_share * args.time_cap, cap - 15)
    if not args.skip_8 and (cap - time.monotonic() > 10 + chain_s or args.dry_run):
        hosts_layout(rep, args, plugin, work, cap - chain_s - 5)
    keep_logs(work, args.out)  # again at the end: a run killed while chaining keeps the layouts' logs
    if not args.skip_chain and (cap - time.monotonic() > 40 or args.dry_run):
        guarded(rep, "chaining", chain_phase, rep, args, plugin, work)
    keep_logs(work, args.out)
    shutil.rmtree(state_root(), ignore_errors=True)
    rep.header["load_avg_end"] = os.getloadavg()
    rep.header["seconds"] = round(time.monotonic() - t0, 1)
    (rep.out / "facts.json").write_text(json.dumps(rep.header, indent=1) + "\n")
    (rep.out / "table.md").write_text(rep.table())
    print(rep.table())
    return 0


def read_rows(folder: Path) -> list[dict]:
    """A run's rows from its results.jsonl (a refined cell's last line)."""
    return gpu_stats.last_rows((folder / "results.jsonl").read_text().splitlines(), json.loads)


def merge(out: Path, parts: list[Path]) -> Report:
    """Several device calls' folders as one: their rows (a cell measured twice keeps the later call's row;
    both figures listed under "repeats" in facts.json and the table), their headers under "parts"."""
    headers = [json.loads((p / "facts.json").read_text()) if (p / "facts.json").is_file() else {} for p in parts]
    rows, repeats = gpu_stats.merge_rows([read_rows(p) for p in parts])
    head = {k: v for k, v in headers[0].items() if k not in ("recorder", "chaining", "phase_errors")} if headers else {}
    head.update(parts=[{"folder": str(p), **h} for p, h in zip(parts, headers)], repeats=repeats)
    rep = Report(out, head)
    rep.rows = rows
    with open(out / "results.jsonl", "w") as f:
        f.writelines(json.dumps(r) + "\n" for r in rows)
    text = rep.table()
    if repeats:
        text += "\nCells measured in more than one call (recorder cost, % ± spread, earlier -> later):\n" + "".join(
            f"- {' '.join(map(str, r['cell']))}: {fmt_cost(r['earlier'])} -> {fmt_cost(r['later'])}\n" for r in repeats)
    (out / "table.md").write_text(text)
    return rep


def fmt_cost(cost: dict | None) -> str:
    return "error" if cost is None else f"{cost['pct']:+.2f}% ± {cost['spread']:.2f}"


def offline(argv: list[str]) -> int:
    """`merge OUT DIR...`: one table from several calls. `plan DIR... [--batch-s S] [--hosts-batch-s S]
    [--target T]`: per layout and cell, the rounds and seconds to reach the target under the recorded design and
    under this one (the layout's own batch length)."""
    ap = argparse.ArgumentParser(prog="recorder_gpu.py " + argv[0])
    ap.add_argument("folders", type=Path, nargs="+")
    ap.add_argument("--batch-s", type=float, default=0.01, help="the 1-rank layout's batch")
    ap.add_argument("--hosts-batch-s", type=float, default=HOSTS_BATCH_S, help="the many-hosts layout's batch")
    ap.add_argument("--target", type=float, default=0.5)
    ap.add_argument("--cell-cap", type=float, default=float("inf"))
    ap.add_argument("--min-cell-s", type=float, default=5)
    args = ap.parse_args(argv[1:])
    if argv[0] == "merge":
        if len(args.folders) < 2:
            ap.error("merge OUT DIR [DIR...]")
        print(merge(args.folders[0], args.folders[1:]).table())
        return 0
    for folder in args.folders:
        rows = read_rows(folder)
        for layout in dict.fromkeys(r["layout"] for r in rows):
            print_plan(folder, [r for r in rows if r["layout"] == layout], layout, args)
    return 0


def print_plan(folder: Path, rows: list[dict], layout: str, args) -> None:
    """One layout's `plan` lines (none for a layout without paired rounds: the runs before 2026-12-08's 8 hosts)."""
    batch = args.batch_s if layout == "1 rank" else args.hosts_batch_s
    cells = gpu_stats.plan(rows, args.target, batch, args.cell_cap, min_s=args.min_cell_s)
    if not cells:
        return
    print(f"{folder} [{layout}]: to {args.target} points; now = the recorded batches at their stated spread; new = "
          f"{batch * 1e3:g} ms batches, spread x {gpu_stats.understatement(rows):.2f} "
          f"(the layout's A/A rms z), at least {gpu_stats.MIN_ROUNDS} rounds and {args.min_cell_s:g} s")
    for c in cells:
        print(f"  {c['what']:>10} {human(c['bytes'] or 0):>6} spread {c['spread']:5.2f} after {c['n']:4d} rounds "
              f"(batch {c['batch_ms']:5.1f} ms + {c['overhead_ms']:4.1f} ms): now {c['rounds_now']:6.0f} rounds "
              f"{c['seconds_now']:6.0f} s, new {c['rounds_new']:6.0f} rounds {c['seconds_new']:5.0f} s"
              + (f" CAP (spread {c['spread_new']:.2f})" if c["capped"] else ""))
    now, new = sum(c["seconds_now"] for c in cells), sum(c["seconds_new"] for c in cells)
    print(f"  total: now {now:.0f} s, new {new:.0f} s")


if __name__ == "__main__":
    sys.exit(main())
