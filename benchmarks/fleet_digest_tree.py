"""Collect to verdict on a simulated job of 8 ranks a host: flat (every host's archive to the root) against
the reduced tree (gateways merge their hosts' digests; the root gets one merged digest a gateway).

Why: issue 30 asks for a 100,000-rank job (12,500 hosts x 8 ranks, 1 s ssh latency) from `collect --hosts`
to verdict in 30 s, the verdict within 10 s of the last answer, orchestrator RSS < 2 GB. This machine
cannot be 12,500 hosts: as benchmarks/fleet_fanout.py does, a stand-in ssh (standin_ssh.c) waits 1 s and
prints a REAL host answer; here each host has its own answer (its own ranks), made from two real
collections of 8 rank-like Python processes on this machine (the remote collector, forensics.fleet.remote): all
sleeping, and the same with one process stopped (SIGSTOP: the culprit, a frozen rank, on one host).
Each host's answer is that archive with its ranks renumbered (host h holds ranks 8h..8h+7) and its
digest made again from the renumbered files by the readers (parsers.digest_first.digest_host).

Rows, each a fresh process (its peak RSS is its own), on the same answers:
- flat, full read: collect_fleet over every host, then `analyze` reading every raw file (the baseline);
- flat, digest first: the same collection, `analyze` digest first (class judgement, raw files of the odd ones);
- reduced tree: G gateways (`python -m forensics.fleet.reduce gateway`, exec'd here by the stand-in as
  sshd would on a gateway) each collect their share flat and answer one merged digest; the root merges
  them and judges the classes (forensics.fleet.reduce.collect_reduced: `odd_s`, the odd ones out), then
  fetches from the gateways the raw files of only the odd ranks' hosts and runs the judges over them and the
  merged digest (forensics.fleet.tree_verdict.tree_verdict): `verdict_s` is the same full verdict as the flat rows'.
Every row has `after_last_answer_s`: from the last host's (tree: gateway's) answer to the verdict.
The gateways share these 2 cores with everything else; their CPU is not the root's.

    PYTHONPATH=. python benchmarks/fleet_digest_tree.py [--ranks 4096,32768] [--gateways 8] [--fanout 1024]
"""

from __future__ import annotations

import argparse
import base64
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
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
PER_HOST = 8
#: a rank-like Python process: waits in a loop as a hung rank's main thread does (py-spy reads its stack)
RANK_LIKE = "import time\ndef wait_for_peers():\n    while True:\n        time.sleep(0.5)\nwait_for_peers()\n"


def collect_template(stop: int | None) -> bytes:
    """The remote collector's archive of 8 rank-like processes here (`stop`: that one SIGSTOPped)."""
    from forensics.fleet.remote import collect_archive, parse_args

    own = f"standin-{os.getpid()}-{time.monotonic_ns()}"  #: only these processes: another run's are not ours
    procs = [subprocess.Popen([sys.executable, "-c", RANK_LIKE], start_new_session=True,
                              env=dict(os.environ, RANK=str(r), WORLD_SIZE=str(PER_HOST), LOCAL_RANK=str(r),
                                       LOCAL_WORLD_SIZE=str(PER_HOST), FORENSICS_SIM_HOST=own))
             for r in range(PER_HOST)]
    work = Path(tempfile.mkdtemp(prefix="bench-tree-answer-"))
    try:
        time.sleep(0.3)
        if stop is not None:
            os.kill(procs[stop].pid, signal.SIGSTOP)
        args = parse_args(["--tag", "bench", "--timeout", "10", "--deadline", "30", "--second-look", "0",
                           "--match-env", f"FORENSICS_SIM_HOST={own}"])
        header, archive = collect_archive(args, work)
    finally:
        for p in procs:
            os.killpg(p.pid, signal.SIGKILL)
            p.wait()
        shutil.rmtree(work, ignore_errors=True)
    if archive is None:
        raise SystemExit(f"no archive: {header}")
    return archive


def host_answer(template: bytes, h: int, world: int, work: Path, kb) -> tuple[str, int]:
    """The template with its ranks renumbered for host h, its digest made again; wire lines and archive size."""
    from forensics.fleet import wire
    from parsers.digest import DIGEST_NAME, write_json
    from parsers.digest_first import digest_host
    from parsers.source import open_source

    shutil.rmtree(work, ignore_errors=True)
    with tarfile.open(fileobj=io.BytesIO(template)) as tar:
        tar.extractall(work, filter="data")
    root = work / "bundle"
    man = json.loads((root / "manifest.json").read_text())
    text = json.dumps(man)
    new_rank = {}
    for r in man["ranks"]:
        old = Path(r["dir"]).name  # rank<local>-pid<pid>
        new = f"rank{h * PER_HOST + r['rank']}-{old.split('-', 1)[1]}"
        new_rank[new] = h * PER_HOST + r["rank"]
        text = text.replace(f"/{old}", f"/{new}")
        env_path = root / r["dir"] / "environ.json"
        env = json.loads(env_path.read_text())
        env.update(RANK=str(new_rank[new]), WORLD_SIZE=str(world))
        env_path.write_text(json.dumps(env))
        (root / r["dir"]).rename(root / r["dir"].replace(f"/{old}", f"/{new}"))
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


def make_answers(folder: Path, hosts: int, culprit_host: int) -> int:
    """One answer file a host (node00000 ...), in `folder`; returns the bytes a host sends on average."""
    from parsers import knowledge

    kb = knowledge.load(use_env=False)
    calm, stopped = collect_template(None), collect_template(3)
    folder.mkdir(parents=True, exist_ok=True)
    work = folder.parent / "renumber"
    total = 0
    for h in range(hosts):
        lines, _ = host_answer(stopped if h == culprit_host else calm, h, hosts * PER_HOST, work, kb)
        (folder / f"node{h:05d}").write_text(lines)
        total += len(lines)
    shutil.rmtree(work, ignore_errors=True)
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
            gws = {f"gw{g}": names[g * share:(g + 1) * share] for g in range(gateways) if names[g * share:(g + 1) * share]}
            res = collect_reduced(gws, out / "root", spec, str(out / "{gateway}"), host_timeout=120,
                                  gateway_timeout=600, fanout=fanout, ssh_path=str(standin),
                                  gateway_python=sys.executable, gateway_ssh_path=str(standin))
            from parsers import knowledge

            tree, info = tree_verdict(res, gws, out / "root", str(out / "{gateway}"), timeout=600, ssh_path=str(standin),
                                      gateway_python=sys.executable, kb=knowledge.load(use_env=False))
            done = time.perf_counter()
            v = tree.verdict
            row.update(last_answer_s=res["phases"]["answers"], odd_s=res["phases"]["judged"],
                       fetch_s=info["phases"]["fetched"], verdict_s=round(done - start, 3),
                       after_last_answer_s=round(done - start - res["phases"]["answers"], 3),
                       wire_bytes=res["bytes_received"], odd=res["odd_ranks"], classes=res["classes"],
                       fetched=info["hosts_fetched"], fetch_bytes=info["bytes_fetched"], culprit=v.culprit.rank if v.culprit else None,
                       suspects=[s.rank for s in v.suspects][:5], refused=res["refused"][:3], ranks_seen=res["ranks"])
        else:
            from parsers import knowledge
            from parsers.analyze import analyze

            runner = ssh_runner([], fanout, ssh_path=str(standin))
            result = collect_fleet(names, out / "b", spec, runner, host_timeout=120, quiet=True, cleanup=False)
            answered = time.perf_counter()
            v = analyze(out / "b", knowledge.load(use_env=False), digests=mode == "digest").verdict
            done = time.perf_counter()
            suspects = [s.rank for s in v.suspects][:5]
            row.update(last_answer_s=round(start + result.phases["answers"] - start, 3), collected_s=round(answered - start, 3),
                       verdict_s=round(done - start, 3), analyze_s=round(done - answered, 3),
                       after_last_answer_s=round(done - start - result.phases["answers"], 3),
                       wire_bytes=sum(os.path.getsize(answers / n) for n in names), culprit=v.culprit.rank if v.culprit else None,
                       suspects=suspects, ranks_seen=len(result.manifest.ranks), digests=v.sections.get("digests", {}).get("odd_ones_out_by"))
    finally:
        shutil.rmtree(out, ignore_errors=True)
    me = resource.getrusage(resource.RUSAGE_SELF)
    row["peak_rss_mb"] = round(me.ru_maxrss / 1024, 1)
    return row


def main() -> int:
    from benchmarks.fleet_fanout import compile_standin, default_bundle_dir

    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--ranks", default="4096,32768")
    ap.add_argument("--gateways", type=int, default=8)
    ap.add_argument("--fanout", type=int, default=1024)
    ap.add_argument("--modes", default="full,digest,tree")
    ap.add_argument("--one", nargs=4, metavar=("MODE", "HOSTS", "ANSWERS", "STANDIN"), help=argparse.SUPPRESS)
    args = ap.parse_args()
    bundle_dir = default_bundle_dir()
    if args.one:
        print(json.dumps(one(args.one[0], int(args.one[1]), args.gateways, args.fanout, Path(args.one[2]),
                             Path(args.one[3]), bundle_dir)))
        return 0
    tmp = Path(tempfile.mkdtemp(prefix="bench-tree-", dir=bundle_dir))
    try:
        standin, kind = compile_standin(tmp)
        for ranks in (int(r) for r in args.ranks.split(",")):
            hosts = ranks // PER_HOST
            t = time.perf_counter()
            answers = tmp / f"answers-{hosts}"
            size = make_answers(answers, hosts, culprit_host=hosts // 3)
            print(f"{ranks} ranks ({hosts} hosts x {PER_HOST}): answers made in {time.perf_counter() - t:.0f} s, "
                  f"{size} bytes a host on the wire; culprit: rank {hosts // 3 * PER_HOST + 3} (stopped); stand-in {kind}",
                  flush=True)
            for mode in args.modes.split(","):
                load = os.getloadavg()[0]
                env = dict(os.environ, PYTHONPATH=os.pathsep.join(p for p in (str(REPO), os.environ.get("PYTHONPATH", "")) if p))
                done = subprocess.run([sys.executable, __file__, "--gateways", str(args.gateways), "--fanout", str(args.fanout),
                                       "--one", mode, str(hosts), str(answers), str(standin)], capture_output=True, text=True, env=env)
                if done.returncode != 0:
                    print(f"  {mode}: failed: {done.stderr.strip()[-1500:]}", flush=True)
                    continue
                row = json.loads(done.stdout.strip().splitlines()[-1])
                row["load"] = [round(load, 2), round(os.getloadavg()[0], 2)]
                print("  " + json.dumps(row), flush=True)
            shutil.rmtree(answers, ignore_errors=True)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
