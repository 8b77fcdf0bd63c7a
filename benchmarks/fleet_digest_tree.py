"""Collect to verdict on a simulated job of 8 ranks a host: flat (every host's archive to the root) against
the reduced tree (gateways merge their hosts' digests; the root gets one merged digest a gateway).

Why: issue 30 asks for a 100,000-rank job (12,500 hosts x 8 ranks, 1 s ssh latency) from `collect --hosts`
to verdict in 30 s, the verdict within 10 s of the last answer, orchestrator RSS < 2 GB. This machine
cannot be 12,500 hosts: as benchmarks/fleet_fanout.py does, a stand-in ssh (standin_ssh.c) waits 1 s and
prints a REAL host answer; here each host has its own answer (its own ranks), made from two real
collections of 8 rank-like Python processes on this machine (the remote collector, forensics.fleet.remote): all
sleeping, and the same with one process stopped (SIGSTOP: the culprit, a frozen rank, on one host).
Each host's answer is that archive with its ranks renumbered (host h holds ranks 8h..8h+7) and its
digest made again from the renumbered files by the readers (parsers.scale.digest_first.digest_host), written
from the templates' files in memory by a process pool over every core (~20-30 ms of CPU a host here:
12,500 hosts take ~20 s on 16 cores; one process took 5-17 min).

Rows, each a fresh process (its peak RSS is its own), on the same answers:
- flat, full read: collect_fleet over every host, then `analyze` reading every raw file (the baseline);
- flat, digest first: the same collection, `analyze` digest first (class judgement, raw files of the odd ones);
- reduced tree: G gateways (`python -m forensics.fleet.reduce gateway`, exec'd here by the stand-in as
  sshd would on a gateway) each collect their share flat and answer one merged digest; the root merges
  them and judges the classes (forensics.fleet.reduce.collect_reduced: `odd_s`, the odd ones out), then
  fetches from the gateways the raw files of only the odd ranks' hosts and runs the judges over them and the
  merged digest (forensics.fleet.tree_verdict.tree_verdict): `verdict_s` is the same full verdict as the flat rows';
- reduced tree through the CLI (`cli`), as a user runs it: `python -m forensics collect --hosts node[...]
  --gateways gw[...] --reduce --json`; last answer = when its progress line for the last gateway arrived,
  verdict = when it exited with its JSON printed (Python's start-up included), peak RSS its own (VmHWM).
Every row has `after_last_answer_s`: from the last host's (tree: gateway's) answer to the verdict.
The gateways share this machine's cores with everything else; their CPU is not the root's.
`--rows 4096:cli,...` runs rows in that order; with `--budget-s` a row (or a size's answers) whose estimate,
scaled linearly from the largest size of its kind run, does not fit is skipped, and one that overruns is
killed with its process group; both are recorded in `--json-out` (scripts/device/fleet_100k.sh).

    PYTHONPATH=. python benchmarks/fleet_digest_tree.py [--ranks 4096,32768] [--gateways 8] [--fanout 1024]
    PYTHONPATH=. python benchmarks/fleet_digest_tree.py --rows 4096:cli,4096:digest --gateways 16 \
        --gateway-fanout 256 --budget-s 460 --json-out rows.json --table-out rows.txt
"""

from __future__ import annotations

import argparse
import concurrent.futures
import multiprocessing
import io
import json
import os
import resource
import shutil
import signal
import subprocess
import sys
import tarfile
import tempfile
import threading
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
PER_HOST = 8
#: a rank-like Python process: waits in a loop as a hung rank's main thread does (py-spy reads its stack)
RANK_LIKE = "import time\ndef wait_for_peers():\n    while True:\n        time.sleep(0.5)\nwait_for_peers()\n"


def collect_template(stop: int | None) -> bytes:
    """The remote collector's archive of 8 rank-like processes here (`stop`: that one SIGSTOPped)."""
    from forensics.fleet.remote import collect_archive, parse_args

    mark = f"standin-{os.getpid()}-{time.monotonic_ns()}"  # this run's processes only (other runs share the machine)
    procs = [subprocess.Popen([sys.executable, "-c", RANK_LIKE], start_new_session=True,
                              env=dict(os.environ, RANK=str(r), WORLD_SIZE=str(PER_HOST), LOCAL_RANK=str(r),
                                       LOCAL_WORLD_SIZE=str(PER_HOST), FORENSICS_SIM_HOST=mark))
             for r in range(PER_HOST)]
    work = Path(tempfile.mkdtemp(prefix="bench-tree-answer-"))
    try:
        time.sleep(0.3)
        if stop is not None:
            os.kill(procs[stop].pid, signal.SIGSTOP)
            wait_stopped(procs[stop].pid)
        args = parse_args(["--tag", "bench", "--timeout", "10", "--deadline", "30", "--second-look", "0",
                           "--match-env", f"FORENSICS_SIM_HOST={mark}"])
        header, archive = collect_archive(args, work)
    finally:
        for p in procs:
            os.killpg(p.pid, signal.SIGKILL)
            p.wait()
        shutil.rmtree(work, ignore_errors=True)
    if archive is None:
        raise SystemExit(f"no archive: {header}")
    found = len(json.loads(template_files(archive)["bundle/manifest.json"])["ranks"])
    if found != PER_HOST:
        raise SystemExit(f"the template collection found {found} rank-like processes, not {PER_HOST}")
    return archive


def wait_stopped(pid: int, limit: float = 10.0) -> None:
    """Until the kernel shows `pid` stopped (state T): kill() only queues SIGSTOP, and on a busy machine the
    collector could read /proc before the process ran to take it (a template without its culprit)."""
    end = time.monotonic() + limit
    while time.monotonic() < end:
        with open(f"/proc/{pid}/stat") as fh:
            if fh.read().rsplit(")", 1)[1].split()[0] in ("T", "t"):
                return
        time.sleep(0.01)
    raise SystemExit(f"pid {pid} not stopped {limit:g} s after SIGSTOP")


def template_files(archive: bytes) -> dict[str, bytes]:
    """A template archive's regular files by their path (bundle/...), read once: each host's answer is written
    from memory (no tar extraction a host). Our own collector made the archive; its paths are checked anyway."""
    files = {}
    with tarfile.open(fileobj=io.BytesIO(archive)) as tar:
        for m in tar.getmembers():
            parts = m.name.split("/")
            if not m.isfile() or parts[0] != "bundle" or any(x in ("", ".", "..") for x in parts):
                continue
            files[m.name] = tar.extractfile(m).read()
    return files


def host_answer(files: dict[str, bytes], h: int, world: int, work: Path, kb) -> tuple[str, int]:
    """The template (`template_files`) with its ranks renumbered for host h (its rank folders, the manifest,
    RANK and WORLD_SIZE in each environ.json), written into `work` and digested again from those files by the
    readers (parsers.scale.digest_first.digest_host); returns the wire lines and the archive's size."""
    from forensics.fleet import wire
    from parsers.scale.digest import DIGEST_NAME, write_json
    from parsers.scale.digest_first import digest_host
    from parsers.gather.source import open_source

    shutil.rmtree(work, ignore_errors=True)
    root = work / "bundle"
    man = json.loads(files["bundle/manifest.json"])
    text = json.dumps(man)
    renamed, new_rank = {}, {}
    for r in man["ranks"]:
        old = Path(r["dir"]).name  # rank<local>-pid<pid>
        new = f"rank{h * PER_HOST + r['rank']}-{old.split('-', 1)[1]}"
        new_rank[new] = h * PER_HOST + r["rank"]
        renamed[f"bundle/{r['dir']}/"] = f"bundle/{r['dir'][:-len(old)]}{new}/"
        text = text.replace(f"/{old}", f"/{new}")
    for name, data in files.items():
        if name == "bundle/manifest.json":
            continue
        for old_dir, new_dir in renamed.items():
            if name.startswith(old_dir):
                name = new_dir + name[len(old_dir):]
                if name.endswith("/environ.json"):
                    env = json.loads(data)
                    env.update(RANK=str(new_rank[Path(new_dir).name]), WORLD_SIZE=str(world))
                    data = json.dumps(env).encode()
                break
        path = work / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)
    man = json.loads(text)
    for r in man["ranks"]:
        r["rank"], r["world_size"] = new_rank[Path(r["dir"]).name], world
    (root / "manifest.json").write_text(json.dumps(man))
    with open_source(root) as src:
        for rec in src.manifest.hosts:
            (root / rec.dir / DIGEST_NAME).write_bytes(write_json(digest_host(src, rec.host, kb)))
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz", compresslevel=1) as tar:
        tar.add(root, arcname="bundle")
    archive = buf.getvalue()
    header = {"host": "vm", "pid": 1, "status": "ok", "error": None, "ranks": PER_HOST, "problems": []}
    return "".join(line + "\n" for line in wire.encode(header, archive)), len(archive)


_POOL: dict = {}  #: in each answer-making worker: the templates' files, the knowledge base, the folders


def _init_answers(calm: bytes, stopped: bytes, folder: Path, world: int, culprit_host: int) -> None:
    from parsers import knowledge

    _POOL.update(calm=template_files(calm), stopped=template_files(stopped), folder=folder, world=world,
                 culprit=culprit_host, kb=knowledge.load(use_env=False))


def _answer_block(lo: int, hi: int) -> int:
    """Hosts lo..hi-1's answer files (one worker); the characters written."""
    work, total = _POOL["folder"].parent / f"renumber-{os.getpid()}", 0
    for h in range(lo, hi):
        lines, _ = host_answer(_POOL["stopped" if h == _POOL["culprit"] else "calm"], h, _POOL["world"], work,
                               _POOL["kb"])
        (_POOL["folder"] / f"node{h:05d}").write_text(lines)
        total += len(lines)
    shutil.rmtree(work, ignore_errors=True)
    return total


def make_answers(folder: Path, hosts: int, culprit_host: int, workers: int | None = None,
                 templates: tuple[bytes, bytes] | None = None) -> int:
    """One answer file a host (node00000 ...), in `folder`, made by `workers` processes (default: every core;
    1: here); returns the bytes a host sends on average. `templates`: (calm, stopped) archives made before
    (collect_template), so that several sizes share the two real collections."""
    calm, stopped = templates or (collect_template(None), collect_template(3))
    folder.mkdir(parents=True, exist_ok=True)
    workers = max(1, min(workers or os.cpu_count() or 1, hosts))
    _init_answers(calm, stopped, folder, hosts * PER_HOST, culprit_host)
    host_answer(_POOL["calm"], 0, PER_HOST, folder.parent / "renumber-warm", _POOL["kb"])  # imports, before the fork
    shutil.rmtree(folder.parent / "renumber-warm", ignore_errors=True)
    if workers == 1:
        return _answer_block(0, hosts) // hosts
    step = max(1, -(-hosts // (workers * 4)))  # a few blocks a worker: an even finish
    blocks = [(lo, min(hosts, lo + step)) for lo in range(0, hosts, step)]
    # forked workers inherit _POOL and the imported readers (0.6 s of imports a worker otherwise)
    with concurrent.futures.ProcessPoolExecutor(workers, mp_context=multiprocessing.get_context("fork")) as pool:
        total = sum(pool.map(_answer_block, *zip(*blocks)))
    return total // hosts


def one(mode: str, hosts: int, gateways: int, fanout: int, answers: Path, standin: Path, bundle_parent: str) -> dict:
    from forensics.fleet import command as cmd
    from forensics.fleet.collect import collect_fleet, new_tag, ssh_runner
    from forensics.fleet.reduce import collect_reduced
    from forensics.fleet.tree_verdict import tree_verdict

    os.environ["FORENSICS_STANDIN_LATENCY"] = "1"
    os.environ["FORENSICS_STANDIN_ANSWER"] = str(answers)
    names = [f"node{i:05d}" for i in range(hosts)]
    out = Path(tempfile.mkdtemp(prefix="bench-tree-", dir=bundle_parent))
    spec = cmd.RemoteSpec(python=sys.executable, tag=new_tag(), timeout=20)
    row: dict = {"mode": mode, "hosts": hosts, "ranks": hosts * PER_HOST}
    try:
        start = time.perf_counter()
        if mode == "tree":
            share = -(-hosts // gateways)
            gws = {f"gw{g}": names[g * share:(g + 1) * share] for g in range(gateways)
                   if names[g * share:(g + 1) * share]}
            res = collect_reduced(gws, out / "root", spec, str(out / "{gateway}"), host_timeout=120,
                                  gateway_timeout=600, fanout=fanout, ssh_path=str(standin),
                                  gateway_python=sys.executable, gateway_ssh_path=str(standin))
            from parsers import knowledge

            tree, info = tree_verdict(res, gws, out / "root", str(out / "{gateway}"), timeout=600,
                                      ssh_path=str(standin),
                                      gateway_python=sys.executable, kb=knowledge.load(use_env=False))
            done = time.perf_counter()
            v = tree.verdict
            row.update(last_answer_s=res["phases"]["answers"], odd_s=res["phases"]["judged"],
                       fetch_s=info["phases"]["fetched"], verdict_s=round(done - start, 3),
                       after_last_answer_s=round(done - start - res["phases"]["answers"], 3),
                       wire_bytes=res["bytes_received"], odd=res["odd_ranks"], classes=res["classes"],
                       fetched=info["hosts_fetched"], fetch_bytes=info["bytes_fetched"],
                       culprit=v.culprit.rank if v.culprit else None,
                       suspects=[s.rank for s in v.suspects][:5], refused=res["refused"][:3], ranks_seen=res["ranks"])
        else:
            from parsers import knowledge
            from parsers.pipeline.analyze import analyze

            runner = ssh_runner([], fanout, ssh_path=str(standin))
            result = collect_fleet(names, out / "b", spec, runner, host_timeout=120, quiet=True, cleanup=False)
            answered = time.perf_counter()
            v = analyze(out / "b", knowledge.load(use_env=False), digests=mode == "digest").verdict
            done = time.perf_counter()
            suspects = [s.rank for s in v.suspects][:5]
            row.update(last_answer_s=round(start + result.phases["answers"] - start, 3),
                       collected_s=round(answered - start, 3),
                       verdict_s=round(done - start, 3), analyze_s=round(done - answered, 3),
                       after_last_answer_s=round(done - start - result.phases["answers"], 3),
                       wire_bytes=sum(os.path.getsize(answers / n) for n in names),
                       culprit=v.culprit.rank if v.culprit else None,
                       suspects=suspects, ranks_seen=len(result.manifest.ranks),
                       digests=v.sections.get("digests", {}).get("odd_ones_out_by"),
                       # analyze over the digests' classes (parsers.scale.focus): the hosts whose evidence was built
                       focus_hosts=(v.sections.get("digests", {}).get("focus") or {}).get("hosts_read"))
    finally:
        shutil.rmtree(out, ignore_errors=True)
    me = resource.getrusage(resource.RUSAGE_SELF)
    row["peak_rss_mb"] = round(me.ru_maxrss / 1024, 1)
    return row


#: the CLI in a fresh process, as a user runs it (`python -m forensics ...`), writing its own peak RSS (VmHWM) at exit
#: to the file named by its first argument: the stand-ins and gateways it starts are its children, so wait4's
#: usage would mix theirs in
CLI_WITH_PEAK = ("import atexit, runpy, sys\n"
                 "out = sys.argv.pop(1)\n"
                 "def peak():\n"
                 "    with open('/proc/self/status') as f, open(out, 'w') as o:\n"
                 "        o.write(''.join(line for line in f if line.startswith(('VmHWM', 'VmRSS'))))\n"
                 "atexit.register(peak)\n"
                 "runpy.run_module('forensics', run_name='__main__', alter_sys=True)\n")


def run_timed(argv: list[str], env: dict, timeout: float) -> dict:
    """Run `argv` in its own process group; every stderr line stamped with the seconds since start as it arrives.
    Past `timeout` the whole group is killed (the row is then marked so, not lost); after a normal end the group
    is killed too, so no stand-in or gateway outlives its row."""
    start = time.perf_counter()
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, stdin=subprocess.DEVNULL, env=env,
                            text=True, errors="replace", start_new_session=True)
    out: list[str] = []
    err: list[tuple[float, str]] = []
    readers = [threading.Thread(target=lambda: out.extend(proc.stdout), daemon=True),
               threading.Thread(target=lambda: err.extend((round(time.perf_counter() - start, 3), line.rstrip("\n"))
                                                          for line in proc.stderr), daemon=True)]
    for t in readers:
        t.start()
    killed = False
    try:
        proc.wait(timeout=max(1.0, timeout))
    except subprocess.TimeoutExpired:
        killed = True
    ended = time.perf_counter() - start
    try:
        os.killpg(proc.pid, signal.SIGKILL)  # the group this function started: the row's stand-ins and gateways
    except ProcessLookupError:
        pass
    proc.wait()
    for t in readers:
        t.join(timeout=10)
    return {"rc": proc.returncode, "killed": killed, "seconds": round(ended, 3), "stdout": "".join(out), "stderr": err}


def cli_row(hosts: int, gateways: int, fanout: int, answers: Path, standin: Path, bundle_parent: str,
            timeout: float) -> dict:
    """The reduced tree as a user runs it: `python -m forensics collect --hosts node[...] --gateways gw[...]
    --reduce --json`, a fresh process (its peak RSS its own). The gateways (the stand-in execs each one's
    `python -m forensics.fleet.reduce gateway` here) collect `fanout` hosts at once. Time to the last answer:
    when the CLI's progress line for the last gateway reached us; to the verdict: when the CLI exited
    (its JSON printed)."""
    out = Path(tempfile.mkdtemp(prefix="bench-tree-cli-", dir=bundle_parent))
    rss = out / "peak.txt"
    argv = [sys.executable, "-c", CLI_WITH_PEAK, str(rss), "collect", "--hosts", f"node[00000-{hosts - 1:05d}]",
            "--gateways", f"gw[00-{gateways - 1:02d}]", "--reduce", "--json", "-v", "--ssh-path", str(standin),
            "--remote-python", sys.executable, "--fanout", str(fanout), "--timeout", "20", "--host-timeout", "60",
            "--gateway-timeout", str(int(max(90, timeout))), "--gateway-out", str(out / "{gateway}"),
            "-o", str(out / "root")]
    env = dict(os.environ, FORENSICS_STANDIN_LATENCY="1", FORENSICS_STANDIN_ANSWER=str(answers),
               PYTHONPATH=os.pathsep.join(p for p in (str(REPO), os.environ.get("PYTHONPATH", "")) if p))
    row: dict = {"mode": "cli", "hosts": hosts, "ranks": hosts * PER_HOST, "gateways": gateways,
                 "gateway_fanout": fanout}
    try:
        run = run_timed(argv, env, timeout)
        heard = [t for t, line in run["stderr"]
                 if line.startswith("gw") and (": answered (" in line or ": timed out (" in line or ": exit " in line)]
        row.update(rc=run["rc"], verdict_s=run["seconds"], gateway_lines=len(heard), stderr_lines=len(run["stderr"]))
        if run["killed"]:
            row["status"] = f"killed at the budget ({timeout:.0f} s)"
            return row
        try:
            doc = json.loads(run["stdout"])
        except ValueError:
            row.update(status="failed", stderr=[line for _, line in run["stderr"]][-15:], stdout=run["stdout"][-1500:])
            return row
        doc = doc.get("data", doc) if isinstance(doc.get("data"), dict) else doc
        verdict = doc.get("verdict") or {}
        culprit = (verdict.get("culprit") or {}).get("rank")
        fetched = doc.get("fetched") or {}
        last = max(heard) if heard else None
        peak = ({k: int(v.split()[0]) for k, _, v in (line.partition(":") for line in rss.read_text().splitlines())}
                if rss.exists() else {})
        row.update(status="ok", last_answer_s=last,
                   after_last_answer_s=round(run["seconds"] - last, 3) if last else None,
                   phases=doc.get("phases"), root_peak_rss_mb=round(peak.get("VmHWM", 0) / 1024, 1),
                   bytes_to_root=int(doc.get("bytes_received") or 0) + int(fetched.get("bytes_fetched") or 0),
                   merged_digest_bytes=doc.get("bytes_received"), fetched_bytes=fetched.get("bytes_fetched"),
                   hosts_fetched=fetched.get("hosts_fetched"), odd=doc.get("odd_ranks"), ranks_seen=doc.get("ranks"),
                   hosts_seen=doc.get("hosts"), refused=(doc.get("gateways_refused") or [])[:3],
                   exit_code=doc.get("exit_code"),
                   culprit=culprit, suspects=[s.get("rank") for s in verdict.get("suspects") or []][:5],
                   summary=str(verdict.get("summary"))[:300])
    finally:
        shutil.rmtree(out, ignore_errors=True)
    return row


def bundle_parent(need_bytes: int) -> str:
    """Where answers and bundles go: tmpfs (benchmarks/fleet_fanout.default_bundle_dir) when it has room for
    `need_bytes`, else the temp folder (a container's /dev/shm is often 64 MB)."""
    from benchmarks.fleet_fanout import default_bundle_dir

    chosen = default_bundle_dir()
    if shutil.disk_usage(chosen).free < need_bytes:
        chosen = tempfile.gettempdir()
    return chosen


def plan_rows(args: argparse.Namespace) -> list[tuple[int, str]]:
    """(ranks, mode) in the order to run: --rows as given, else every size with every mode."""
    if args.rows:
        return [(int(r), m) for r, m in (item.split(":") for item in args.rows.split(","))]
    return [(int(r), m) for r in args.ranks.split(",") for m in args.modes.split(",")]


def estimate(done: list[dict], mode: str, ranks: int) -> float | None:
    """Seconds a row of `mode` at `ranks` should take, scaled linearly from the largest one run (x1.25 + 5 s:
    these rows are linear or better in hosts); None when none of that mode ran."""
    runs = [r for r in done if r["mode"] == mode and r.get("status") == "ok" and r.get("wall_s")]
    if not runs:
        return None
    base = max(runs, key=lambda r: r["ranks"])
    return base["wall_s"] * max(1.0, ranks / base["ranks"]) * 1.25 + 5


def _options() -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--ranks", default="4096,32768")
    ap.add_argument("--gateways", type=int, default=8)
    ap.add_argument("--fanout", type=int, default=1024,
                    help="ssh at once: the flat root's, and each gateway's unless --gateway-fanout")
    ap.add_argument("--gateway-fanout", type=int, default=None, help="ssh at once on each gateway (tree rows)")
    ap.add_argument("--modes", default="full,digest,tree",
                    help="full, digest, tree (library) and cli (the reduced tree "
                                                                "through `forensics collect --reduce --json`)")
    ap.add_argument("--rows", default="", help="RANKS:MODE,... in this order (instead of --ranks x --modes)")
    ap.add_argument("--workers", type=int, default=None, help="processes making the answers (default: every core)")
    ap.add_argument("--budget-s", type=float, default=0, help="skip the rows that would end past this (0: no budget)")
    ap.add_argument("--json-out", type=Path, default=None, help="every row, skipped ones too, as one JSON")
    ap.add_argument("--table-out", type=Path, default=None)
    ap.add_argument("--one", nargs=4, metavar=("MODE", "HOSTS", "ANSWERS", "STANDIN"), help=argparse.SUPPRESS)
    ap.add_argument("--bundle-dir", default=None, help=argparse.SUPPRESS)  # a row's: under its driver's folder
    return ap.parse_args()


def main() -> int:
    from benchmarks.fleet_fanout import filesystem

    args = _options()
    gw_fanout = args.gateway_fanout or args.fanout
    rows = plan_rows(args)
    biggest = max(r for r, _ in rows) // PER_HOST
    # answers ~45 kB a host, filed files ~200 kB, twice
    bundle_dir = args.bundle_dir or bundle_parent(biggest * 600_000)
    if args.one:
        fanout = gw_fanout if args.one[0] == "tree" else args.fanout
        print(json.dumps(one(args.one[0], int(args.one[1]), args.gateways, fanout, Path(args.one[2]),
                             Path(args.one[3]), bundle_dir)))
        return 0
    report: dict = {"benchmark": "fleet_digest_tree", "cpus": os.cpu_count(), "python": sys.version.split()[0],
                    "bundle_dir": bundle_dir, "filesystem": filesystem(Path(bundle_dir)), "per_host": PER_HOST,
                    "gateways": args.gateways, "gateway_fanout": gw_fanout, "flat_fanout": args.fanout,
                    "latency_s": 1, "budget_s": args.budget_s, "answers": {}, "rows": []}
    _Driver(args, report, Path(tempfile.mkdtemp(prefix="bench-tree-", dir=bundle_dir))).run(rows)
    return 0


class _Driver:
    """The driver's run of the rows: each row's answers made once per size, each row run in its own process
    (the cli rows through `forensics collect --reduce`), the report saved after every step.

    Why a class: the rows share the report, the work folder, the stand-in ssh and the answers made so far."""

    def __init__(self, args: argparse.Namespace, report: dict, tmp: Path) -> None:
        self.args, self.report, self.tmp = args, report, tmp
        self.begin = time.perf_counter()
        self.deadline = self.begin + args.budget_s if args.budget_s else None
        self.gw_fanout = args.gateway_fanout or args.fanout
        self.env = dict(os.environ,
                        PYTHONPATH=os.pathsep.join(p for p in (str(REPO), os.environ.get("PYTHONPATH", "")) if p))
        self.answers: dict[int, Path] = {}
        self.standin = Path()
        self.kind = ""
        self.templates: tuple = ()
        report["work_dir"] = str(tmp)  # answers, stand-in, every row's bundles: removed at the end

    def save(self) -> None:
        args, report = self.args, self.report
        report["elapsed_s"] = round(time.perf_counter() - self.begin, 1)
        if args.json_out:
            args.json_out.write_text(json.dumps(report, indent=1))
        if args.table_out:
            args.table_out.write_text(table(report))

    def left(self) -> float:
        return self.deadline - time.perf_counter() if self.deadline else 3600.0

    def run(self, rows: list[tuple[int, str]]) -> None:
        from benchmarks.fleet_fanout import compile_standin

        report = self.report
        try:
            self.standin, self.kind = compile_standin(self.tmp)
            report["standin"] = self.kind
            t = time.perf_counter()
            self.templates = (collect_template(None), collect_template(3))
            report["templates_s"] = round(time.perf_counter() - t, 2)
            report["template_states"] = [[json.loads(v).get("state") for k, v in sorted(template_files(a).items())
                                          # the stopped one: a 'T'
                                          if k.endswith("/proc.json")] for a in self.templates]
            for i, (ranks, mode) in enumerate(rows):
                hosts = ranks // PER_HOST
                if hosts not in self.answers and not self.make(ranks, mode):
                    continue
                row = self.row(ranks, mode)
                report["rows"].append(row)
                print("  " + json.dumps(row), flush=True)
                self.save()
                if all(r // PER_HOST != hosts for r, _ in rows[i + 1:]):  # no later row needs these answers
                    shutil.rmtree(self.answers.pop(hosts), ignore_errors=True)
        finally:
            shutil.rmtree(self.tmp, ignore_errors=True)
            self.save()

    def make(self, ranks: int, mode: str) -> bool:
        """Make the answers of a size (every host's, the culprit's host stopped); False, and the row skipped,
        when they were skipped before or would not be made in the time left."""
        report, hosts, left = self.report, ranks // PER_HOST, self.left()
        made = report["answers"].get(str(ranks))
        guess = estimate([dict(mode="answers", **a) for a in report["answers"].values()], "answers", ranks)
        if made is not None or (guess is not None and guess > left):
            report["rows"].append({"mode": mode, "ranks": ranks,
                                   "status": f"skipped: its answers not made ({left:.0f} s left)"})
            skipped = f"skipped (estimated {guess:.0f} s, {left:.0f} s left)"
            report["answers"].setdefault(str(ranks), {"ranks": ranks, "status": skipped})
            self.save()
            return False
        t, cpu = time.perf_counter(), os.times()
        self.answers[hosts] = self.tmp / f"answers-{hosts}"
        size = make_answers(self.answers[hosts], hosts, culprit_host=hosts // 3, workers=self.args.workers,
                            templates=self.templates)
        wall, cpu2 = time.perf_counter() - t, os.times()
        used = (cpu2.user + cpu2.system + cpu2.children_user + cpu2.children_system
                - cpu.user - cpu.system - cpu.children_user - cpu.children_system)
        report["answers"][str(ranks)] = {"ranks": ranks, "hosts": hosts, "status": "ok", "wall_s": round(wall, 2),
                                         "cpu_ms_a_host": round(used / hosts * 1000, 1), "bytes_a_host": size,
                                         "culprit": hosts // 3 * PER_HOST + 3}
        print(f"{ranks} ranks ({hosts} hosts x {PER_HOST}): answers made in {wall:.1f} s "
              f"({used / hosts * 1000:.1f} ms CPU a host), {size} bytes a host on the wire; culprit: rank "
              f"{hosts // 3 * PER_HOST + 3} (stopped); stand-in {self.kind}", flush=True)
        self.save()
        return True

    def row(self, ranks: int, mode: str) -> dict:
        """Run one row (or skip it when it would not end in the time left): its measures and its culprit's check."""
        args, hosts, left = self.args, ranks // PER_HOST, self.left()
        guess = estimate(self.report["rows"], mode, ranks)
        load = os.getloadavg()[0]
        if guess is not None and guess > left:
            row = {"mode": mode, "ranks": ranks, "status": f"skipped: estimated {guess:.0f} s, {left:.0f} s left"}
        elif mode == "cli":
            row = cli_row(hosts, args.gateways, self.gw_fanout, self.answers[hosts], self.standin, str(self.tmp), left)
            row["wall_s"] = row.get("verdict_s")
        else:
            run = run_timed([sys.executable, __file__, "--gateways", str(args.gateways), "--fanout", str(args.fanout),
                             "--gateway-fanout", str(self.gw_fanout), "--ranks", str(ranks), "--modes", mode,
                             "--bundle-dir", str(self.tmp),  # what a row killed at the budget leaves goes with tmp
                             "--one", mode, str(hosts), str(self.answers[hosts]), str(self.standin)], self.env, left)
            if run["killed"]:
                row = {"mode": mode, "ranks": ranks, "status": f"killed at the budget ({left:.0f} s)"}
            elif run["rc"] != 0:
                row = {"mode": mode, "ranks": ranks, "status": "failed", "stderr": [x for _, x in run["stderr"]][-15:]}
            else:
                row = dict(json.loads(run["stdout"].strip().splitlines()[-1]), status="ok")
                row["root_peak_rss_mb"] = row.pop("peak_rss_mb", None)
                row["bytes_to_root"] = (row.get("wire_bytes") if mode != "tree"
                                        else row.get("wire_bytes", 0) + row.get("fetch_bytes", 0))
            row["wall_s"] = run["seconds"]
        row.setdefault("hosts", hosts)
        row["load"] = [round(load, 2), round(os.getloadavg()[0], 2)]
        if row.get("status") == "ok":
            row["culprit_ok"] = row.get("culprit") == hosts // 3 * PER_HOST + 3
        return row


def table(report: dict) -> str:
    """The rows as a short text table (the JSON has every field)."""
    lines = [f"fleet_digest_tree: {report.get('cpus')} CPUs, python {report.get('python')}, bundles on "
             f"{report.get('filesystem')} ({report.get('bundle_dir')}), stand-in {report.get('standin')}, 1 s a host; "
             f"tree: {report.get('gateways')} gateways x fan-out {report.get('gateway_fanout')}; flat fan-out "
             f"{report.get('flat_fanout')}; {report.get('elapsed_s')} s in all (budget {report.get('budget_s')} s)"]
    for a in report.get("answers", {}).values():
        measured = (f", {a['wall_s']} s, {a['cpu_ms_a_host']} ms CPU a host, {a['bytes_a_host']} B a host"
                    if a.get("status") == "ok" else "")
        lines.append(f"answers {a['ranks']}: {a.get('status')}" + measured)
    head = ("ranks", "row", "status", "last answer s", "verdict s", "after last s", "root RSS MB", "bytes to root",
            "culprit ok", "load")
    lines.append(" | ".join(head))
    names = {"cli": "tree, CLI --reduce", "tree": "tree, library", "digest": "flat, digest first",
             "full": "flat, full read"}
    for r in report.get("rows", []):
        lines.append(" | ".join(str(x) for x in (r.get("ranks"), names.get(r.get("mode"), r.get("mode")),
                                                 r.get("status"),
                                                 r.get("last_answer_s"), r.get("verdict_s"),
                                                 r.get("after_last_answer_s"),
                                                 r.get("root_peak_rss_mb"), r.get("bytes_to_root"), r.get("culprit_ok"),
                                                 r.get("load"))))
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    sys.exit(main())
