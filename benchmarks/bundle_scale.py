"""Benchmark: `forensics analyze` on a bundle of N ranks laid out as `forensics collect` writes it.

Why: the one pipeline reads every file of a bundle through the registry; at 100k ranks
that is 600k files. The goal (issue 12 item 7) is a 100k-rank bundle analysed in under
60 s with peak RSS under 4 GB on this 2-core machine. Each rank gets what the collector
writes for a hung rank: proc.json, environ.json, pyspy.json (main thread in all_reduce,
one rank sleeping elsewhere), stdout/stderr tails, and its NCCL log (init, topology, 11
all_reduces, the culprit one fewer). The analysis runs in a child process so its peak
RSS is its own (ru_maxrss of the child).

Digest first (issue 30): each host's digest is made as `collect` makes it (parsers.scale.digest_first.digest_host,
in a child process, timed apart: on a real job each host makes its own, in parallel), then the same
bundle is analysed three times in the same run: every raw file read (the baseline), digest first over every
rank, and over the digests' classes (parsers.scale.focus, the default of `forensics analyze`: evidence for the
odd ones' hosts and one host a class); the ratios and the culprits are printed. `--no-digest` runs the full read
only, as before.

What a real collection carries (issue 43): since collect takes a second look, a bundle without one names no
culprit ("no time says the job hangs"), so each rank also gets its recorder file (a real capture's, said
again for this rank) and collect's second look, unchanged over 3 s; `--bare` writes the bundle without them.
The run fails unless every analysis names the injected culprit (named, not a first suspect), and each
analysis is said as a ratio to the time to read every collected file once in the same run (the goal: 0.5).
`--replicate CAPTURE` analyses a bundle fixture replicated to --ranks instead (tests/support/replicate.py).

    PYTHONPATH=. python benchmarks/bundle_scale.py [--ranks 100000] [--ranks-per-host 8] [--keep DIR] [--no-digest]
        [--analyze-only] [--phases] [--bare] [--replicate CAPTURE]
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

from datetime import datetime
from typing import Any, Iterator

from benchmarks.recorder_copy import recorder_as
from benchmarks.synthetic_job import COMM_ID, rank_lines
from forensics.report.words import analyze
from parsers import knowledge
from parsers.scale.digest import DIGEST_NAME, kb_key, write_json
from parsers.scale.digest_first import digest_host
from parsers.gather.source import Source, open_source
from parsers.readers.recorder import decode_recorder

GOAL_S, GOAL_RSS_GB = 60.0, 4.0


#: the capture whose recorder files the collected bundle's ranks carry: 8 ranks in 11 all_reduces, rank 5 asleep
#: before the 11th (the synthetic job's shape); rank 0's file stands for every waiting rank, rank 5's for the culprit
RECORDER_CAPTURE = Path(__file__).resolve().parents[1] / "tests" / "fixtures" / "nccl" / "sleep" / "bundle"
#: the second look's gap (seconds), as collect's default
LOOK_GAP_S = 3.0


def _recorder_templates() -> tuple[bytes, bytes, str]:
    """(a waiting rank's recorder file, the sleeper's, the capture's collection time)."""
    man = json.loads((RECORDER_CAPTURE / "manifest.json").read_text())
    files = {r["rank"]: next((RECORDER_CAPTURE / r["dir"]).rglob("nccl-recorder.*.bin")) for r in man["ranks"]}
    return files[0].read_bytes(), files[5].read_bytes(), man["created"]


def write_sparse(path: Path, data: bytes, block: int = 4096) -> None:
    """`data` written with its zero blocks left as holes: a recorder file is mostly empty ring (300 kB, 68 kB used)."""
    zero = bytes(block)
    with open(path, "wb") as f:
        for at in range(0, len(data), block):
            chunk = data[at:at + block]
            if chunk == zero[:len(chunk)]:
                f.seek(len(chunk), os.SEEK_CUR)
            else:
                f.write(chunk)
        f.truncate(len(data))


def _second_look(pid: int, rank: int, t0: float, frames: list[dict], state: str, log: tuple[str, int],
                 rec: tuple[str, Any]) -> dict[str, Any]:
    """collect's second look at one rank: two looks LOOK_GAP_S apart that find nothing changed (a hang)."""
    name, st = rec
    counters = {"file": name, "comm": COMM_ID.removeprefix("0x"), "coll_next": st.coll_next,
                "p2p_next": st.p2p_next, "proxy_next": st.proxy_next,
                "completed": sum(1 for c in st.colls if c.complete_ns),
                "max_seq": max((c.seq for c in st.colls), default=0),
                "newest_progress_ns": max((c.last_progress_ns for c in st.colls), default=0)}
    looks = []
    for i, t in enumerate((t0, t0 + LOOK_GAP_S)):
        threads = [{"tid": pid, "name": "python3", "state": state, "wchan": "futex_wait_queue", "cpu_ticks": 500}]
        dump = [{"pid": pid, "thread_id": pid, "os_thread_id": pid, "thread_name": "MainThread", "active": True,
                 "owns_gil": True, "frames": frames}]
        proc = {"state": state, "wchan": "futex_wait_queue", "cpu_ticks": 500, "clock_ticks": 100,
                "threads": threads, "io": {"rchar": 1000, "wchar": 100, "syscr": 10, "syscw": 5}}
        looks.append({"t": t, "proc": proc,
                      "stacks": [{"t": t + 0.01, "threads": dump}], "stack_errors": [], "state_after": state,
                      "nccl_log": {"file": log[0], "size": log[1]},
                      "recorder": [dict(counters, heartbeat_count=59 + 15 * i)], "t_end": t + 0.3})
    return {"format": "hang-forensics-second-look", "version": 1, "pid": pid, "rank": rank,
            "requested_gap_s": LOOK_GAP_S, "waited_s": LOOK_GAP_S, "looks": looks}


def write_bundle(root: Path, ranks: int, per_host: int, culprit: int, ops: int = 11, collected: bool = False) -> int:
    """A bundle as collect writes it; returns the number of files. `collected`: each rank also carries what a
    collection of a live NCCL job carries since the recorder and the second look: its recorder file (a real one,
    said again for this rank: benchmarks/recorder_copy.py) and collect's second look, and the manifest's time is
    the recorder's clock; without it (the tests of the focus's layout) only the files above."""
    manifest = {"created": "2026-12-01T00:00:00+00:00", "tool_version": "bench", "format": "hang-forensics-bundle",
                "version": 1, "command": ["bench"], "hosts": [], "ranks": [], "missing": [], "artifacts": [],
                "notes": []}
    if collected:
        waiting, sleeper, manifest["created"] = _recorder_templates()
        t0 = datetime.fromisoformat(manifest["created"]).timestamp() + 1.0
        states = {k: decode_recorder(v, f"template-{k}") for k, v in (("w", waiting), ("s", sleeper))}
    files = 0
    for r in range(ranks):
        host = f"node{r // per_host:05d}"
        pid = 10000 + r
        rel = f"hosts/{host}/rank{r}-pid{pid}"
        d = root / rel
        (d / "nccl").mkdir(parents=True, exist_ok=True)
        state = "S"
        main_thread = {"tid": pid, "name": "python3", "state": state, "wchan": "futex_wait_queue"}
        (d / "proc.json").write_text(json.dumps({"pid": pid, "state": state, "comm": "python3", "ppid": 1, "uid": 0,
                                                 "wchan": "futex_wait_queue", "threads": [main_thread]}))
        (d / "environ.json").write_text(json.dumps({"RANK": str(r), "WORLD_SIZE": str(ranks),
                                                    "LOCAL_RANK": str(r % per_host),
                                                    "LOCAL_WORLD_SIZE": str(per_host), "MASTER_ADDR": "node00000",
                                                    "MASTER_PORT": "29500", "PATH": "/usr/bin"}))
        frames = ([{"name": "slow_data_loader", "filename": "train.py", "line": 47}] if r == culprit else
                  [{"name": "all_reduce", "filename": "torch/distributed/distributed_c10d.py", "line": 3252}])
        frames.append({"name": "main", "filename": "train.py", "line": 80})
        (d / "pyspy.json").write_text(json.dumps([{"pid": pid, "thread_id": pid, "os_thread_id": pid,
                                                   "thread_name": "MainThread", "active": True, "owns_gil": True,
                                                   "frames": frames}]))
        (d / "stdout.log").write_text(f"[train] rank {r} step 10\n")
        (d / "stderr.log").write_text("")
        log = rank_lines(r, ranks, ops - 1 if r == culprit else ops, host=host, pid=pid)
        (d / "nccl" / f"nccl.{host}.{pid}.log").write_text("".join(log))
        files += 6
        cols = [
            {"name": "process_state", "status": "ok", "files": [f"{rel}/proc.json"]},
            {"name": "environment", "status": "ok", "files": [f"{rel}/environ.json"]},
            {"name": "stdio", "status": "ok", "files": [f"{rel}/stdout.log", f"{rel}/stderr.log"]},
            {"name": "nccl_log", "status": "ok", "files": [f"{rel}/nccl/nccl.{host}.{pid}.log"]},
            {"name": "py-spy", "status": "ok", "files": [f"{rel}/pyspy.json"]},
        ]
        if collected:
            name = f"nccl-recorder.{host}.{pid}.0.bin"
            (d / "recorder").mkdir(exist_ok=True)
            which = "s" if r == culprit else "w"
            write_sparse(d / "recorder" / name, recorder_as(sleeper if r == culprit else waiting, r, ranks, pid, host,
                                                             comm_id=int(COMM_ID, 16)))
            look = _second_look(pid, r, t0, frames, state, (f"nccl.{host}.{pid}.log", len("".join(log))),
                                (name, states[which]))
            (d / "second-look.json").write_text(json.dumps(look))
            files += 2
            cols += [{"name": "recorder", "status": "ok", "files": [f"{rel}/recorder/{name}"]},
                     {"name": "second-look", "status": "ok", "files": [f"{rel}/second-look.json"]}]
        manifest["ranks"].append({"host": host, "pid": pid, "dir": rel, "rank": r, "local_rank": r % per_host,
                                  "world_size": ranks, "local_world_size": per_host, "job_id": "node00000:29500",
                                  "state_before": state, "state_after": state, "collectors": cols})
    for h in range((ranks + per_host - 1) // per_host):
        manifest["hosts"].append({"host": f"node{h:05d}", "status": "ok", "collectors": [],
                                  "dir": f"hosts/node{h:05d}"})
    (root / "manifest.json").write_text(json.dumps(manifest))
    return files + 1


CHILD = """
import json, os, resource, sys, time
t, cpu = time.perf_counter(), sum(os.times()[:4])  # CPU of this process and of the reader processes it waited for
from parsers.pipeline.analyze import analyze
from parsers import knowledge
mode = sys.argv[2]  # full: every raw file; digest: digest first over every rank; focus: over the classes (the default)
v = analyze(sys.argv[1], knowledge.load(use_env=False), digests=mode != "full",
            focus_from=None if mode == "digest" else 0).verdict
# the judges name no culprit without a sign of time (no watchdog line in this synthetic job): its first suspect then
c = v.culprit or (v.suspects[0] if v.suspects else None)
print(json.dumps({"seconds": time.perf_counter() - t, "cpu_s": sum(os.times()[:4]) - cpu,
                  "rss_kb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss,
                  "culprit": c.rank if c else None, "reason": str(c.reason_class) if c else None,
                  "named": v.culprit is not None,
                  "digests": {k: x for k, x in (v.sections.get("digests") or {}).items() if k != "focus"},
                  "focus": ((v.sections.get("digests") or {}).get("focus") or {}).get("hosts_read")}))
"""

#: each host's digest as collect writes it (one host's files read by the readers), for every host in turn
DIGESTS = """
import json, resource, sys, time
from pathlib import Path
t = time.perf_counter()
from benchmarks.bundle_scale import write_digests
from parsers import knowledge
hosts, size = write_digests(Path(sys.argv[1]), knowledge.load(use_env=False))
print(json.dumps({"seconds": time.perf_counter() - t, "bytes": size, "hosts": hosts,
                  "rss_kb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss}))
"""


def write_digests(root: Path, kb: Any, workers: int = 1) -> tuple[int, int]:
    """Each host's digest as `collect` writes it at the end of a collection: from that host's own files and
    manifest records only (the bundle listed once, its files split by host folder). (hosts, bytes written).
    `workers` > 1: the hosts split among that many processes (on a fleet each host makes its own at once; a
    100,000-rank bundle's 12,500 digests one after another take longer than its analysis)."""
    with open_source(root) as src:
        by_dir: dict[str, list] = {}
        ranks: dict[str, list] = {}
        for ref in src.files:
            by_dir.setdefault("/".join(ref.rel.split("/", 2)[:2]), []).append(ref)
        for r in src.manifest.ranks:
            ranks.setdefault(r.host, []).append(r)
        tasks = [(rec, by_dir.get(rec.dir, []), dataclasses.replace(src.manifest, hosts=[rec],
                                                                    ranks=ranks.get(rec.host, []), missing=[]))
                 for rec in src.manifest.hosts]
        if workers <= 1 or len(tasks) < 2 * workers or kb_key(kb) != kb_key(knowledge.load(use_env=False)):
            return len(tasks), sum(_host_digests(src, kb, tasks))
    bare = dataclasses.replace(src.manifest, hosts=[], ranks=[], artifacts=[], missing=[])
    step = -(-len(tasks) // (4 * workers))
    chunks = [tasks[i:i + step] for i in range(0, len(tasks), step)]
    with ProcessPoolExecutor(max_workers=workers) as pool:
        sizes = pool.map(_digest_task, [str(root)] * len(chunks), [bare] * len(chunks), chunks)
        return len(tasks), sum(sizes)


def _host_digests(src: Any, kb: Any, tasks: list[tuple[Any, list, Any]]) -> Iterator[int]:
    """Each task's host digest written in its folder; the bytes of each."""
    for rec, refs, own in tasks:
        data = write_json(digest_host(src, rec.host, kb, refs=refs, manifest=own))
        (src.root / rec.dir / DIGEST_NAME).write_bytes(data)
        yield len(data)


def _digest_task(root: str, bare: Any, tasks: list[tuple[Any, list, Any]]) -> int:
    """A worker's share of `write_digests`: the bundle's Source made from what the task brings (its hosts' files
    and manifest parts), the default knowledge base loaded here (the caller's: `write_digests` checks).

    Why not `open_source`: it reads and checks the whole manifest, O(ranks), once a task: at 4,096 ranks 0.8 s of
    CPU a task, 8 tasks in 2 workers; at 100,000 ranks, 64 tasks in 16 workers, each read the 100,000 records."""
    src = Source(root=Path(root), given=Path(root), form="bundle", listed=False,
                 manifest=dataclasses.replace(bare, hosts=[rec for rec, _, _ in tasks]))
    return sum(_host_digests(src, knowledge.load(use_env=False), tasks))


#: tree mode's reduction (forensics.fleet.reduce) over the digests made above: the hosts split among G
#: gateways, each gateway's merged digest made from its hosts' digests (forensics.bundle.merged_digest's
#: merge_host_digests, as a gateway's fleet merge makes it; timed one by one: on a fleet the
#: gateways run side by side, so the slowest one is the tree's cost), the root's merge of the G answers,
#: and the class judgement of the root's merged digest (parsers.scale.classes); bytes of each level
TREE = """
import json, os, resource, sys, time
from pathlib import Path
from parsers.scale.digest import DIGEST_NAME, StatedJob
from parsers.scale.classes import judge_classes
from forensics.bundle.merged_digest import merge_host_digests
from forensics.fleet.reduce import merge_answers
from parsers.gather.source import open_source
root, gateways = sys.argv[1], int(sys.argv[2])
raw = dig = 0
for d, _, names in os.walk(root):
    for n in names:
        size = os.stat(os.path.join(d, n)).st_size
        if n == DIGEST_NAME:
            dig += size
        elif n != "manifest.json":
            raw += size
with open_source(root) as src:
    hosts, job = src.manifest.hosts, StatedJob.of(src.manifest)
job.processes  # each host's processes, made once untimed (a gateway's manifest holds its own hosts' only)
share = -(-len(hosts) // gateways)
answers, times = [], []
for g in range(0, len(hosts), share):
    t = time.perf_counter()
    doc = merge_host_digests(Path(root), hosts[g:g + share], job).summary  # what each gateway's merge runs
    answers.append(json.dumps(doc.to_json(), separators=(",", ":")))
    times.append(time.perf_counter() - t)
t = time.perf_counter()
merged, bad = merge_answers(answers)
t_merge = time.perf_counter() - t
t = time.perf_counter()
j = judge_classes(merged)
t_judge = time.perf_counter() - t
print(json.dumps({"gateways": len(answers), "gateway_max_s": max(times), "gateway_sum_s": sum(times),
                  "root_merge_s": t_merge, "judge_s": t_judge, "answer_bytes": sum(map(len, answers)),
                  "digest_bytes": dig, "raw_bytes": raw,
                  "classes": j.summary(), "odd": [[lo, hi] for lo, hi in j.ranks][:20], "bad": bad,
                  "rss_kb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss}))
"""


#: digest first's CPU phase by phase (README "Digest-first analyze: where the time goes"): the pipeline's
#: steps called in turn in one process, then the digests read, and read and decoded, again one host at a
#: time for the split of load_digest_first, and the evidence assembled again
PHASES = """
import json, os, resource, sys, time
from parsers import knowledge
from parsers.gather.source import open_source
from parsers.scale.digest_first import load_digest_first
from parsers.scale.digest import read_digest, decode_parsed, DIGEST_NAME
from parsers.gather.evidence import assemble
from parsers.pipeline.analyze import JUDGES, ranks_table
from parsers.pipeline.merge import merge_verdict
from parsers.judges.logs import unread
from parsers.model.findings import JudgeContext
from parsers.gather.quiet_gc import pause_gc
kb = knowledge.load(use_env=False)
P, out, root = time.process_time, {}, sys.argv[1]
with pause_gc():
    c = P(); src = open_source(root); out["open"] = P() - c
    c = P(); read = load_digest_first(src, kb); out["load_digest_first"] = P() - c
    ev, ctx = read.evidence, JudgeContext(kb=kb)
    for judge in JUDGES:
        c = P(); ctx.found.append(judge(ev, ctx))
        out["judge " + judge.__module__.replace("parsers.judges.", "")] = P() - c
    c = P(); merge_verdict(ev, ctx.found); ranks_table(ev); unread.section(ev); out["merge and sections"] = P() - c
    hosts = src.manifest.hosts
    c = P()
    for r in hosts:
        read_digest(os.path.join(root, r.dir, DIGEST_NAME))
    out["part: digests read and JSON"] = P() - c
    c = P()
    for r in hosts:
        d = read_digest(os.path.join(root, r.dir, DIGEST_NAME))
        for rel, e in d.files.items():
            if "parsed" in e:
                decode_parsed(e["parsed"], os.path.join(root, r.dir, rel), rel, d.host)
    out["part: decoded to the model"] = P() - c - out["part: digests read and JSON"]
    c = P(); assemble(src, read.arts); out["part: evidence assembled"] = P() - c
out["rss_kb"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
print(json.dumps(out))
"""


#: the baseline of the ratio: every file the collection wrote (not the digests made from them) opened and read
#: once, whole, in one process
READ_ALL = """
import json, os, sys, time
t, cpu = time.perf_counter(), sum(os.times()[:4])
files = size = 0
for d, _, names in os.walk(sys.argv[1]):
    for n in names:
        if n == "digest.json":
            continue
        with open(os.path.join(d, n), "rb") as f:
            while chunk := f.read(1 << 20):
                size += len(chunk)
        files += 1
print(json.dumps({"seconds": time.perf_counter() - t, "cpu_s": sum(os.times()[:4]) - cpu, "files": files,
                  "bytes": size}))
"""


def _child(code: str, *args: str) -> dict | None:
    env = dict(os.environ, PYTHONPATH=str(Path(__file__).resolve().parents[1]))
    out = subprocess.run([sys.executable, "-c", code, *args], capture_output=True, text=True, env=env, check=False)
    if out.returncode != 0:
        print(out.stderr[-2000:])
        return None
    return json.loads(out.stdout.strip().splitlines()[-1])


def _bundle(args: argparse.Namespace, root: Path) -> int:
    """The bundle under `root` (written, or a kept one reused); its injected culprit."""
    t = time.perf_counter()
    if args.replicate:
        return _replicated(args, root)
    culprit = args.ranks // 3
    if args.keep is not None and (root / "manifest.json").exists():  # a kept bundle of this size: reused
        print(f"bundle: {args.ranks} ranks, reused from {root}")
    else:
        n = write_bundle(root, args.ranks, args.ranks_per_host, culprit, collected=not args.bare)
        print(f"bundle: {args.ranks} ranks, {n} files{'' if args.bare else ' (recorder files and second looks)'}, "
              f"written in {time.perf_counter() - t:.1f} s; injected culprit: rank {culprit}, asleep one op behind",
              flush=True)
    return culprit


def _replicated(args: argparse.Namespace, root: Path) -> int:
    """A bundle fixture replicated to --ranks under `root`; its own plain read's culprit."""
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests" / "support"))
    from replicate import KB, healthy_rank, replicate, unpacked  # tests/support: a test helper, loaded on demand
    t = time.perf_counter()
    if root.exists():
        shutil.rmtree(root)
    with tempfile.TemporaryDirectory() as tmp:
        own = unpacked(Path(__file__).resolve().parents[1] / "tests" / "fixtures" / args.replicate, Path(tmp))
        v = analyze(own, KB, digests=False).verdict
        if v.culprit is None:
            raise SystemExit(f"{args.replicate}: its own plain read names no culprit")
        replicate(own, root, args.ranks, healthy_rank(own, v), args.ranks_per_host)
    print(f"bundle: {args.replicate} replicated to {args.ranks} ranks in {time.perf_counter() - t:.1f} s; its culprit: "
          f"rank {v.culprit.rank} [{v.culprit.reason_class}]", flush=True)
    return v.culprit.rank


def _analyses(args: argparse.Namespace, root: Path, culprit: int, base: dict) -> dict | None:
    """Each analysis mode in a child of its own, said against the baseline read; None where a child failed."""
    runs: dict = {}
    for mode in ("full",) if args.no_digest else args.modes.split(","):
        res = _child(CHILD, str(root), mode)
        if res is None:
            return None
        runs[mode] = res
        rss_gb = res["rss_kb"] / 1024 / 1024
        ok = res["culprit"] == culprit and res["named"]
        extra = ""
        if res.get("digests"):
            d = res["digests"]
            extra = (f"; {d['files_from_digest']} files from {d['hosts_from_digest']} digests, "
                     f"{d['files_read_raw']} raw files of {d['processes_read_raw']} processes")
        if res.get("focus"):
            extra += f"; evidence of {res['focus']} host(s), the other ranks judged from their digests' classes"
        named = "culprit" if res["named"] else "first suspect"
        right = "CORRECT" if ok else f"WRONG (truth: culprit {culprit})"
        cpu_ratio = res["cpu_s"] / max(base["cpu_s"], 0.01)
        print(f"analyze ({mode} read): {res['seconds']:.1f} s (CPU {res['cpu_s']:.1f} s; goal < {GOAL_S:.0f} s), "
              f"peak RSS {rss_gb:.2f} GB (goal < {GOAL_RSS_GB:.0f} GB), {named} rank {res['culprit']} "
              f"[{res['reason']}] {right}{extra}; / reading every file once: "
              f"{res['seconds'] / base['seconds']:.2f} (goal <= 0.5; CPU {cpu_ratio:.2f})", flush=True)
    return runs


def _options() -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--ranks", type=int, default=100_000)
    ap.add_argument("--ranks-per-host", type=int, default=8)
    ap.add_argument("--keep", type=Path, help="write the bundle here and keep it (a bundle already there is reused: "
                                              "same --ranks and --ranks-per-host)")
    ap.add_argument("--no-digest", action="store_true", help="the full read only (no digests made or read)")
    ap.add_argument("--modes", default="full,digest,focus", help="the analyses to run, of full (every raw file: "
                    "--no-digests), digest (digest first over every rank) and focus (over the classes: the default); "
                    "at 100,000 ranks the full read holds about 17 GB (1.7 GB at 10,000)")
    ap.add_argument("--gateways", type=int, default=8, help="gateways of the tree's reduction (default 8)")
    ap.add_argument("--analyze-only", action="store_true", help="with --keep: a kept bundle's digests are reused "
                                                                 "(not made again) and the tree is not run")
    ap.add_argument("--phases", action="store_true", help="then digest first's CPU phase by phase (one more child)")
    ap.add_argument("--bare", action="store_true", help="the bundle without recorder files and second look (before "
                                                        "issue 43: no time says the job hangs, so no culprit is named)")
    ap.add_argument("--replicate", metavar="CAPTURE", help="instead of the synthetic job: this bundle fixture (a path "
                    "under tests/fixtures) replicated to --ranks (tests/support/replicate.py), its culprit the truth")
    return ap.parse_args()


def main() -> int:
    args = _options()
    root = args.keep or Path(tempfile.mkdtemp(prefix="bundle-scale-"))
    try:
        culprit = _bundle(args, root)
        reuse = args.analyze_only and args.keep is not None and any((root / "hosts").glob(f"*/{DIGEST_NAME}"))
        if reuse:
            print("digests: reused from the kept bundle; tree not run")
        if not args.no_digest and not reuse:
            made = _child(DIGESTS, str(root))
            if made is None:
                return 1
            print(f"digests: {made['hosts']} hosts, {made['bytes'] / args.ranks / 1024:.1f} kB a rank "
                  f"({made['bytes'] / 1e6:.1f} MB), made in {made['seconds']:.1f} s here one host after another "
                  f"(host-side work: each host makes its own), peak RSS {made['rss_kb'] / 1024:.0f} MB")
        if not args.no_digest and not reuse:
            tree = _child(TREE, str(root), str(args.gateways))
            if tree is None:
                return 1
            c = tree["classes"]
            print(f"tree: {tree['gateways']} gateways reduce their hosts' digests in {tree['gateway_max_s']:.2f} s the "
                  f"slowest ({tree['gateway_sum_s']:.1f} s all, one after another here); root merges their answers in "
                  f"{tree['root_merge_s'] * 1000:.0f} ms, judges {c['ranks_covered']} ranks over classes in "
                  f"{tree['judge_s'] * 1000:.1f} ms ({c['judged']} judgements, complete: {c['complete']}): odd ranks "
                  f"{tree['odd']} (culprit {culprit}); bytes up to the root: raw files "
                  f"{tree['raw_bytes'] / 1e6:.1f} MB, host digests {tree['digest_bytes'] / 1e6:.1f} MB, "
                  f"gateway answers {tree['answer_bytes'] / 1e3:.1f} kB; peak RSS {tree['rss_kb'] / 1024:.0f} MB",
                  flush=True)
        base = _child(READ_ALL, str(root))
        if base is None:
            return 1
        print(f"baseline: every file of the bundle read once: {base['files']} files, {base['bytes'] / 1e6:.0f} MB in "
              f"{base['seconds']:.1f} s (CPU {base['cpu_s']:.1f} s)", flush=True)
        got = _analyses(args, root, culprit, base)
        if got is None:
            return 1
        runs = got
        for mode, what in (("digest", "digest first"), ("focus", "over the classes")):
            if mode not in runs:
                continue
            if "full" not in runs:
                continue
            f, d = runs["full"], runs[mode]
            same = (f["culprit"], f["reason"]) == (d["culprit"], d["reason"])
            print(f"{what} / full read: time {d['seconds'] / f['seconds']:.2f} (CPU {d['cpu_s'] / f['cpu_s']:.2f}), "
                  f"peak RSS {d['rss_kb'] / f['rss_kb']:.2f}; same verdict: {same}")
            if not same:
                return 1
        if args.phases and "digest" in runs:
            ph = _child(PHASES, str(root))
            if ph is None:
                return 1
            print("digest first, CPU by phase: " + ", ".join(f"{k} {v:.2f} s" for k, v in ph.items() if k != "rss_kb"))
        return 0 if all(r["culprit"] == culprit and r["named"] for r in runs.values()) else 1
    finally:
        if args.keep is None:
            shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    raise SystemExit(main())
