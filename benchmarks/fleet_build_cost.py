"""CPU seconds of a scale-parity fleet's build (issue 43): the copies, then every host's digest, against a baseline.

Why: tests/parsers/pipeline/test_scale_parity.py's cases cost mostly their fleet's build (copies of a capture's
rank written by tests/support/replicate.py, then every host's digest as `collect` writes it), not the digest path
it tests. This measures that build, one child process a checkout so each uses its own code, the baseline
checkout first and this one second in the same run (the box's load is then the same for both; CPU seconds of
the process, its workers included, are the run's own where the wall time is mostly waiting).

    PYTHONPATH=. python benchmarks/fleet_build_cost.py --baseline /work/main [--ranks 4096] [--workers 1] CAPTURE...

CAPTURE: a path under this checkout's tests/fixtures: both checkouts replicate the same files (a baseline's own
working tree may lack some). The fleet is written under --tmp and removed after each row.
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parents[1]

#: run in a child with one checkout on its path: copies' user and system CPU s, the digests' the same, wall s
CHILD = """
import json, resource, sys, time
from pathlib import Path
sys.path[:0] = [sys.argv[1] + "/tests/support", sys.argv[1] + "/tests", sys.argv[1]]
from replicate import KB, unpacked, healthy_rank, replicate
from benchmarks.bundle_scale import write_digests
from forensics.report.words import analyze
def cpu():
    s, c = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return s.ru_utime + c.ru_utime, s.ru_stime + c.ru_stime
tmp, workers = Path(sys.argv[4]), int(sys.argv[5])
own = unpacked(Path(sys.argv[6]) / sys.argv[2], tmp)
v = analyze(own, KB, digests=False).verdict
t0, w0 = cpu(), time.perf_counter()
dst = replicate(own, tmp / "fleet", int(sys.argv[3]), healthy_rank(own, v), workers=workers)
t1 = cpu()
write_digests(dst, KB, workers=workers)
t2 = cpu()
print(json.dumps([t1[0] - t0[0], t1[1] - t0[1], t2[0] - t1[0], t2[1] - t1[1], time.perf_counter() - w0]))
"""


def measure(repo: Path, capture: str, ranks: int, workers: int, under: str | None) -> list[float]:
    """One fleet built by `repo`'s code: [copies user, system CPU s, digests user, system CPU s, wall s]."""
    tmp = tempfile.mkdtemp(prefix="fleet-build-", dir=under)
    try:
        out = subprocess.run([sys.executable, "-c", CHILD, str(repo), capture, str(ranks), tmp, str(workers),
                              str(HERE / "tests" / "fixtures")],
                             cwd=repo, env={"PYTHONPATH": str(repo), "PATH": "/usr/bin:/bin"},
                             capture_output=True, text=True, check=True, timeout=3600)
        return json.loads(out.stdout.strip().splitlines()[-1])
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--baseline", required=True, help="the checkout to compare with (its own code and fixtures)")
    ap.add_argument("--ranks", type=int, default=4096)
    ap.add_argument("--workers", type=int, default=1, help="processes for the copies and for the digests")
    ap.add_argument("--repeat", type=int, default=1, help="baseline and this, one after the other, this many times")
    ap.add_argument("--tmp", help="where the fleets are written (default: the system's temporary folder)")
    ap.add_argument("captures", nargs="+")
    args = ap.parse_args()
    print(f"{args.ranks} ranks, {args.workers} worker(s); CPU seconds user + system; the build's wall seconds\n")
    print("| capture | run | copies | digests | wall | user CPU ratio this/baseline |")
    print("| --- | --- | --- | --- | --- | --- |")
    for capture in args.captures:
        for n in range(args.repeat):
            base = measure(Path(args.baseline), capture, args.ranks, args.workers, args.tmp)
            this = measure(HERE, capture, args.ranks, args.workers, args.tmp)
            for name, m in (("baseline", base), ("this", this)):
                ratio = f"{(this[0] + this[2]) / max(base[0] + base[2], 1e-9):.2f}" if name == "this" else ""
                print(f"| {capture} | {name} {n + 1} | {m[0]:.1f} + {m[1]:.1f} | {m[2]:.1f} + {m[3]:.1f} | "
                      f"{m[4]:.0f} | {ratio} |", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
