"""Scale parity table (issue 43): each fault capture replicated to N ranks, its plain read against the digest path.

Why: tests/parsers/pipeline/test_scale_parity.py asserts the parity case by case; this prints the table the issue asks
for (fixture, plain-read culprit and why, digest-path culprit and why, equal?), with why the focus over classes
was or was not used and the seconds of each read, so a disagreement or a fallback is seen at a glance.
The fleet is made by tests/support/replicate.py (the capture's ranks kept, the rest healthy copies of one rank).

    PYTHONPATH=. python benchmarks/scale_parity.py [--ranks 4096] [--jobs N] [--tmp DIR] [CAPTURE ...]

CAPTURE: a path under tests/fixtures (default: the captures of tests/parsers/pipeline/test_scale_parity.py).
--jobs N: the processes that write the copies and the host digests (default: one a CPU; on a fleet every host
makes its own digest at once); the plain read uses the product's own workers (up to 8) whatever N is.
--jobs N,M (say 1,2): each row made once a count, the same answer asked of both, and the ratio of their seconds.

At 100,000 ranks (12,500 hosts) the peak RSS (about 17 GB) is the plain read's; the last column says it. The fleet
needs a few GB of disk under --tmp (recorder files written sparse). One light capture (issue26/lock: 28 kB of NCCL
log a rank) is the 100,000-rank row; the nccl/* captures carry 260 kB of NCCL log a rank (10x the reading).
"""

from __future__ import annotations

import argparse
import os
import resource
import shutil
import sys
import tempfile
import time
from pathlib import Path

sys.path[:0] = [str(Path(__file__).resolve().parents[1] / "tests" / d) for d in ("support", "")]

from forensics.report.words import analyze  # noqa: E402 - after tests/support is on the path
from replicate import KB, culprit_key, fleet  # noqa: E402

FIXTURES = Path(__file__).resolve().parents[1] / "tests" / "fixtures"


def _said(key: list[tuple]) -> str:
    return "; ".join(f"{k[0]} {k[1]}" if k[0] == "deadlock" else f"{k[0]} {k[2]} [{','.join(k[3])}]"
                     for k in key) or "none"


def _peak_gb() -> float:
    """The peak RSS of this process or any child (ru_maxrss: kB on Linux)."""
    return max(resource.getrusage(who).ru_maxrss for who in (resource.RUSAGE_SELF, resource.RUSAGE_CHILDREN)) / 2**20


def row(capture: str, ranks: int, under: str | None = None, jobs: int | None = None) -> tuple[str, tuple]:
    """One table row for `capture` at `ranks`, its fleet built by `jobs` processes; (the row, its answer)."""
    tmp = Path(tempfile.mkdtemp(prefix="scale-parity-", dir=under))
    try:
        took: dict[str, float] = {}
        root, own = fleet(FIXTURES / capture, tmp, ranks, workers=jobs, seconds=took)
        t = time.perf_counter()
        plain = analyze(root, KB, digests=False).verdict
        t_plain = time.perf_counter() - t
        t = time.perf_counter()
        dig = analyze(root, KB).verdict
        t_dig = time.perf_counter() - t
        focus = (dig.sections.get("digests") or {}).get("focus") or {}
        how = focus.get("why_not") or f"focus {focus.get('hosts_read')} hosts"
        kept = [k[:3] for k in culprit_key(plain)] == [k[:3] for k in culprit_key(own)]
        seconds = f"{took['replica']:.0f} + {took['digests']:.0f} / {t_plain:.0f} / {t_dig:.0f}"
        answer = (tuple(culprit_key(plain)), tuple(culprit_key(dig)), how)
        return (f"| {capture} | {jobs} | {_said(culprit_key(plain))} | {_said(culprit_key(dig))} | "
                f"{culprit_key(plain) == culprit_key(dig)} | {kept} | {how} | {seconds} | {_peak_gb():.1f} |"), answer
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def _compared(capture: str, ranks: int, under: str | None, jobs: list[int]) -> None:
    """`capture`'s row once for each count of jobs; whether the answers are the same and the wall-time ratio."""
    walls, answers = [], []
    for n in jobs:
        t = time.perf_counter()
        line, answer = row(capture, ranks, under, n)
        walls.append(time.perf_counter() - t)
        answers.append(answer)
        print(line, flush=True)
    ratios = ", ".join(f"{jobs[0]}/{n} jobs: {walls[0] / w:.2f}x" for n, w in zip(jobs[1:], walls[1:]))
    print(f"<!-- {capture}: same answer for every count of jobs: {len(set(answers)) == 1}; row wall s "
          f"{' / '.join(f'{w:.0f}' for w in walls)}; speed-up {ratios} -->", flush=True)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--ranks", type=int, default=4096)
    ap.add_argument("--jobs", default=str(os.cpu_count() or 1),
                    help="processes for the copies and digests; N,M,... to compare counts (default: one a CPU)")
    ap.add_argument("--tmp", help="where the fleet is written (default: the system's temporary folder)")
    ap.add_argument("captures", nargs="*")
    args = ap.parse_args()
    jobs = [max(1, int(n)) for n in args.jobs.split(",")]
    if not args.captures:
        from tests.parsers.pipeline.test_scale_parity import CAPTURES  # the test's list: one list of the cases
        args.captures = CAPTURES
    print(f"{args.ranks} ranks a fleet, {os.cpu_count()} CPUs, jobs {args.jobs}\n")
    print("| capture | jobs | plain read: culprit why [evidence] | digest path: culprit why [evidence] | equal | "
          "replica kept the capture's culprit | digest path's reading | "
          "seconds: replica + digests / plain / digest | peak RSS GB so far |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- | --- |")
    for c in args.captures:
        if len(jobs) > 1:
            _compared(c, args.ranks, args.tmp, jobs)
        else:
            print(row(c, args.ranks, args.tmp, jobs[0])[0], flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
