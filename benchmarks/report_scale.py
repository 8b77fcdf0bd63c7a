"""How the report's pictures scale with job size, as ratios against 8 ranks measured in the same run.

    PYTHONPATH=. python benchmarks/report_scale.py [--sizes 8,512,4096] [--repeat 3]

For each size: build the wait-for graph of a synthetic verdict (forensics.report.postmortem.synthetic),
then draw the graph, the stack tree and the timeline and write them as SVG, and the
whole HTML report. Prints median seconds per step and the ratio to the 8-rank run.
Rendering cost should follow the number of classes and branches, not of ranks.
"""

from __future__ import annotations

import argparse
import statistics
import time

from forensics.report.postmortem.session import PostMortem
from forensics.report.postmortem.synthetic import synthetic_verdict
from forensics.report.graph import draw_waitfor
from forensics.report.html import build_report
from forensics.report.stacktree import draw_stack_tree
from forensics.report.style import to_svg
from forensics.report.timeline import draw_timeline


def steps(world: int) -> dict[str, float]:
    """Seconds per step for one fresh PostMortem of `world` ranks."""
    out = {}
    t = time.perf_counter()
    pm = PostMortem(synthetic_verdict(world, culprit=world // 3, stopped=world - 5, missing=world - 2), source="bench")
    graph = pm.waitfor
    out["graph data"] = time.perf_counter() - t
    t = time.perf_counter()
    to_svg(draw_waitfor(graph))
    out["graph svg"] = time.perf_counter() - t
    t = time.perf_counter()
    to_svg(draw_stack_tree(pm.merged_stack_tree, {s.rank for s in pm.verdict.suspects}, pm.culprit.rank))
    out["stack tree svg"] = time.perf_counter() - t
    t = time.perf_counter()
    to_svg(draw_timeline(pm.timeline_entries))
    out["timeline svg"] = time.perf_counter() - t
    t = time.perf_counter()
    build_report(PostMortem(pm.verdict, source="bench"))
    out["whole report"] = time.perf_counter() - t
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", default="8,512,4096")
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    sizes = [int(s) for s in args.sizes.split(",")]
    steps(8)  # warm-up: imports and font cache
    results = {}
    for world in sizes:
        runs = [steps(world) for _ in range(args.repeat)]
        results[world] = {k: statistics.median(r[k] for r in runs) for k in runs[0]}
    base = results[sizes[0]]
    print(f"{'step':<16}" + "".join(f"{f'{w} ranks':>22}" for w in sizes))
    for step in base:
        cells = "".join(f"{results[w][step]:>10.3f}s (x{results[w][step] / base[step]:5.1f})" for w in sizes)
        print(f"{step:<16}{cells}")
    big = max(sizes)
    worst = max(results[big].values())
    print(f"goal: every picture and the whole report of {big} ranks in under 1 s (cost follows classes and branches, "
          f"not ranks): slowest step {worst:.3f} s, {'met' if worst < 1.0 else 'NOT met'}")


if __name__ == "__main__":
    main()
