"""`forensics steps`: name the pattern in a run's step times, with likely causes and the next check."""

from __future__ import annotations

import argparse
import dataclasses
from pathlib import Path

from forensics.cli.output import add_output_options, emit, emit_json

from forensics.errors import ForensicsError
from forensics.exitcodes import ExitCode
from parsers.steps.classify import Settings, classify
from parsers.steps.series import SeriesError, read_series

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

examples:
  forensics steps forensics-trigger/steps-rank0.csv
  forensics steps times.txt --expected 0.84 --json
"""

EXIT_CODES = {
    0: "the series was read and classified (a pattern named, or 'looks healthy')",
    1: "internal error (a bug)",
    2: "bad input: unreadable or empty series, a bad --expected",
}


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("series", type=Path, nargs="+", help="step-time file(s); several files are read as consecutive runs")
    parser.add_argument("--expected", type=float, metavar="S", help="the step time the run should reach, seconds")
    parser.add_argument("--warmup", type=int, default=3, metavar="N", help="leading steps to ignore (default 3)")
    add_output_options(parser, json_help="print findings as JSON (schema hang-forensics/steps/1)")


def run(args: argparse.Namespace) -> int:
    if args.expected is not None and not args.expected > 0:
        raise ForensicsError("--expected must be a positive number of seconds")
    try:
        parts = [read_series(p) for p in args.series]
    except SeriesError as err:
        raise ForensicsError(str(err)) from err
    series = parts[0]
    for extra in parts[1:]:  # later files are later runs: each starts a segment
        series.restarts.append(len(series.seconds))
        series.restarts.extend(len(series.seconds) + r for r in extra.restarts)
        series.seconds.extend(extra.seconds)
        series.steps.extend(extra.steps)
    findings = classify(series, Settings(expected=args.expected, warmup=args.warmup))
    if args.json:
        emit_json("steps", {"steps": len(series.seconds), "restarts": series.restarts,
                            "findings": [dataclasses.asdict(f) for f in findings]}, args)
        return int(ExitCode.OK)
    out: list[str] = []
    out.append(f"{len(series.seconds)} steps, {len(series.segments())} run(s)")
    if not findings:
        out.append("no known pattern: the step times look healthy" + ("" if args.expected else " (give --expected to compare with a target)"))
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
