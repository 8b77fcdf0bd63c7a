"""`forensics demo`: a real hang on this machine, diagnosed end to end. No GPU needed."""

from __future__ import annotations

import argparse
import datetime as dt
from pathlib import Path

from forensics.cli.commands.collect import quiet_progress
from forensics.report.output import emit, emit_document, json_text, text_width
from forensics.collectors.base import CollectOptions
from forensics.demo.run import run_demo
from forensics.errors import ForensicsError
from forensics.exitcodes import ExitCode
from forensics.report.text import render_view
from forensics.report.view import build_view

NAME = "demo"
HELP = "hang a real torch.distributed (gloo) job on this machine and diagnose it"
DESCRIPTION = """Start a real torch.distributed job on gloo (CPU, --ranks processes), make one rank
misbehave, wait until the job hangs, collect every rank, analyze, print the verdict,
and stop the job.

faults:
  sleep  the culprit blocks in its data loader before an all_reduce (default)
  stop   the culprit is stopped with SIGSTOP before an all_reduce
  crash  the culprit exits (code 17) while the others build a new process group

The job's own logs live in a temporary folder that is removed at the end; the bundle
(-o) keeps copies of everything the verdict used.
"""

EXIT_CODES = {
    0: "the verdict named the injected culprit",
    1: "internal error, or the demo job did not hang as planned",
    2: "bad arguments (--culprit outside the job), torch not installed",
    4: "the verdict did not name the injected culprit",
}


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--ranks", type=int, default=4, choices=range(2, 9), metavar="N",
                        help="number of ranks, 2-8 (default 4)")
    parser.add_argument("--fault", choices=["sleep", "stop", "crash"], default="sleep",
                        help="what the culprit does (default sleep)")
    parser.add_argument("--culprit", type=int, default=None, help="rank that misbehaves (default: the last but one)")
    parser.add_argument("-o", "--out", "--output", dest="out", type=Path,
                        help="bundle folder (default: a new $TMPDIR/forensics-demo-TIME-XXXX, printed at the end)")
    parser.add_argument("--gdb", action="store_true", help="also take GDB backtraces of every rank (slower)")
    parser.add_argument("--second-look", type=float, default=3.0, metavar="S",
                        help="seconds between collect's two looks at every rank (default 3, at most 60); "
                             "0: one snapshot, "
                             "which cannot tell a hang from progress, so the verdict names no culprit (exit 4)")
    parser.add_argument("--native", action="store_true", help="py-spy --native")
    parser.add_argument("--json", action="store_true",
                        help="print the verdict as JSON (schema hang-forensics/demo/1) on stdout")
    parser.add_argument("--pretty", action="store_true", help="with --json: indent the JSON")
    parser.add_argument("-q", "--quiet", action="store_true", help="no progress lines on stderr")


def run(args: argparse.Namespace) -> int:
    culprit = args.culprit if args.culprit is not None else max(0, args.ranks - 2)
    out = args.out or default_output()
    if not 0 <= args.second_look <= 60:
        raise ForensicsError(f"--second-look {args.second_look:g}: give 0 to 60 seconds")
    options = CollectOptions(native=args.native, gdb=args.gdb, second_look=args.second_look)
    outcome = run_demo(out, args.ranks, args.fault, culprit, options, quiet=quiet_progress(args))
    view = build_view(outcome.verdict, source=str(out))  # once: the text and the JSON render it
    if args.json:
        data = view.to_json()
        data.update(bundle=str(out), injected={"fault": args.fault, "culprit": culprit}, correct=outcome.correct)
        emit_document(json_text("demo", data, args.pretty))
    else:
        text = render_view(view, width=text_width(None))
        emit(text + f"\n\ninjected: rank {culprit} '{args.fault}'  ->  verdict "
                    f"{'CORRECT' if outcome.correct else 'WRONG'}"
             f"\nbundle: {out}   (forensics analyze {out})")
    return int(ExitCode.OK if outcome.correct else ExitCode.INCONCLUSIVE)


def default_output() -> Path:
    """A new folder under the system's temp folder (not the current one: run from a source checkout,
    the demo left an untracked folder in the repository root), made here, owner-only.

    Why not tempfile.gettempdir(): during a command that is the command's scoped temp folder,
    removed when it ends, and the bundle must outlive the demo (its path is printed)."""
    import os
    import tempfile

    parent = os.environ.get("TMPDIR") or "/tmp"
    if not os.path.isdir(parent):
        parent = "."
    return Path(tempfile.mkdtemp(prefix=f"forensics-demo-{dt.datetime.now():%Y%m%d-%H%M%S}-", dir=parent))
