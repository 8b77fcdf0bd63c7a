"""`forensics steps`: name the pattern in a run's step times, with likely causes and the next check."""

from __future__ import annotations

import argparse
import dataclasses
import re
from pathlib import Path

from forensics.report.output import add_output_options, emit, emit_json

from forensics.errors import ForensicsError
from forensics.exitcodes import ExitCode
from parsers.steps.classify import Settings, classify
from parsers.judges.step_ranks import compare_ranks
from parsers.steps.series import SeriesError, StepSeries, read_series

_RANK_IN_NAME = re.compile(r"rank[_-]?(\d{1,7})")

NAME = "steps"
HELP = "classify a run's step times (flat-low, periodic, rare, GC decline, throttling, noise)"
DESCRIPTION = """Read per-step times and name the pattern the way operators read MFU curves:
  flat-low          flat at a fraction of the expected rate from the start (give --expected)
  periodic-slow     single slow steps every N steps (checkpoint, evaluation)
  rare-slow         rare slow steps at random (network, storage, host)
  gc-decline        a slow decline that resets at restart (Python's garbage collector)
  throttle-plateau  a plateau at ~70% of the normal rate (clock throttling)
  noise             high-frequency jitter just under the expected rate
Each finding comes with likely causes and what to check next.

Input: the trigger's steps-rank<R>.csv (forensics.arm() writes it), any CSV with a
'seconds' or 'step_time' column, a JSON list, or one number per line. Step numbers
that go back, or a long wall-clock gap, mark a restart.

With --ranks the files are the ranks of one run (steps-rank<R>.csv): which rank arrives
last at each step's first collective (a straggler, or a slow host), or whether the
slowdown is job-wide (a pattern of the job's median step, no rank late).

examples:
  forensics steps forensics-trigger/steps-rank0.csv
  forensics steps --ranks forensics-trigger/steps-rank*.csv
  forensics steps times.txt --expected 0.84 --json
"""

EXIT_CODES = {
    0: "the series was read and classified (a pattern named, or 'looks healthy')",
    1: "internal error (a bug)",
    2: "bad input: unreadable or empty series, a bad --expected",
}


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("series", type=Path, nargs="+",
                        help="step-time file(s); several files are read as consecutive runs")
    parser.add_argument("--expected", type=float, metavar="S", help="the step time the run should reach, seconds")
    parser.add_argument("--ranks", action="store_true",
                        help="the files are ranks of one run: name a straggler rank or a job-wide slowdown")
    parser.add_argument("--warmup", type=int, default=3, metavar="N", help="leading steps to ignore (default 3)")
    add_output_options(parser, json_help="print findings as JSON (schema hang-forensics/steps/1)")


def run(args: argparse.Namespace) -> int:
    if args.expected is not None and not args.expected > 0:
        raise ForensicsError("--expected must be a positive number of seconds")
    try:
        parts = [read_series(p) for p in args.series]
    except SeriesError as err:
        raise ForensicsError(str(err)) from err
    if args.ranks:
        return _across_ranks(args, parts)
    series = parts[0]
    for extra in parts[1:]:  # later files are later runs: each starts a segment
        series.restarts.append(len(series.seconds))
        series.restarts.extend(len(series.seconds) + r for r in extra.restarts)
        series.seconds.extend(extra.seconds)
        series.steps.extend(extra.steps)
        series.collective_seconds.extend(extra.collective_seconds)
        series.first_enter.extend(extra.first_enter)
    findings = classify(series, Settings(expected=args.expected, warmup=args.warmup))
    if args.json:
        emit_json("steps", {"steps": len(series.seconds), "restarts": series.restarts,
                            "findings": [dataclasses.asdict(f) for f in findings]}, args)
        return int(ExitCode.OK)
    out: list[str] = []
    out.append(f"{len(series.seconds)} steps, {len(series.segments())} run(s)")
    if not findings:
        out.append("no known pattern: the step times look healthy"
                   + ("" if args.expected else " (give --expected to compare with a target)"))
    for f in findings:
        out.append(f"\n{f.kind}: {f.title}  [confidence {f.confidence:.2f}]")
        for line in f.evidence:
            out.append(f"  - {line}")
        out.append("  likely causes:")
        for line in f.causes:
            out.append(f"    * {line}")
        out.append("  next checks:")
        for line in f.next_checks:
            out.append(f"    > {line}")
    emit("\n".join(out), args.output)
    return int(ExitCode.OK)


def _across_ranks(args: argparse.Namespace, parts: list[StepSeries]) -> int:
    """--ranks: one series per rank (the rank from the file name, steps-rank<R>.csv)."""
    by_rank: dict[int, StepSeries] = {}
    for path, series in zip(args.series, parts):
        found = _RANK_IN_NAME.search(Path(path).name)
        if not found:
            raise ForensicsError(f"{path}: no rank in the file name (expected steps-rank<R>.csv)")
        rank = int(found.group(1))
        if rank in by_rank:
            raise ForensicsError(f"{path}: rank {rank} given twice")
        by_rank[rank] = series
    result = compare_ranks(by_rank, warmup=args.warmup)
    if args.json:
        emit_json("steps", {"steps": max(len(s.seconds) for s in parts), "restarts": [],
                            "findings": [dataclasses.asdict(f) for f in result.job_wide],
                            "ranks": result.to_dict()}, args)
    else:
        emit(result.describe(), args.output)
    return int(ExitCode.OK)
