"""Benchmark: NCCL log parse throughput vs `grep -c`, and analysis time for 1k/16k/100k ranks.

Why ratios: this machine is shared (2 cores), so absolute numbers drift; `grep -c`
on the same file in the same run is the baseline a parser is judged against.
Goal (issue 3): a 16k-rank job analysed in under 5 s here.

    PYTHONPATH=. python benchmarks/parse_and_correlate.py [--sizes 1000,16000,100000] [--lines 2000000]
"""

from __future__ import annotations

import argparse
import subprocess
import tempfile
import time
from pathlib import Path

from benchmarks.synthetic_job import job, write_log
from parsers.gather.evidence import read_file
from parsers.gather.source import FileRef
from parsers.gather.quiet_gc import pause_gc
from parsers.judges.logs import correlate


def parse_throughput(lines_wanted: int) -> None:
    ops = 20
    ranks = max(1, lines_wanted // (ops + 4))
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "big-nccl.log"
        n = write_log(path, ranks, ops)
        size_mb = path.stat().st_size / 1e6
        t = time.perf_counter()
        grep = subprocess.run(["grep", "-c", "NCCL INFO", str(path)], capture_output=True, text=True, check=False)
        t_grep = time.perf_counter() - t
        t = time.perf_counter()
        with pause_gc():
            art = read_file(FileRef(path, path.name))
        t_parse = time.perf_counter() - t
        events = len(art.parsed.events) if art.parsed else 0
        print(f"parse: {n} lines, {size_mb:.0f} MB, {events} events: forensics {t_parse:.2f} s "
              f"({n / t_parse / 1e6:.2f} M lines/s), grep -c {t_grep:.3f} s (count {grep.stdout.strip()}); "
              f"ratio parse/grep = {t_parse / t_grep:.1f}x")


def analysis(sizes: list[int]) -> None:
    for world in sizes:
        culprit = world // 3
        t = time.perf_counter()
        arts = job(world, ops=11, culprit=culprit)
        t_parse = time.perf_counter() - t
        t = time.perf_counter()
        result = correlate(arts)
        t_corr = time.perf_counter() - t
        c = result.culprit
        ok = c is not None and c.rank == culprit
        print(f"analysis: {world:>6} ranks: parse {t_parse:.2f} s + correlate {t_corr:.2f} s = "
              f"{t_parse + t_corr:.2f} s; culprit rank {c.rank if c else None} ({c.reason_class if c else '-'}) "
              f"{'correct' if ok else 'WRONG'}; graph {result.graph.number_of_nodes()} nodes "
              f"{result.graph.number_of_edges()} edges")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--sizes", default="1000,16000,100000")
    ap.add_argument("--lines", type=int, default=2_000_000)
    args = ap.parse_args()
    parse_throughput(args.lines)
    analysis([int(x) for x in args.sizes.split(",") if x])
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
