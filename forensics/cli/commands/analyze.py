"""`forensics analyze`: read a bundle and name the culprit rank, its host, and why."""

from __future__ import annotations

import argparse
import json
import shutil
from pathlib import Path

from forensics.errors import ForensicsError
from forensics.cli.output import add_output_options, emit, json_text
from forensics.exitcodes import ExitCode
from forensics.report.text import render_verdict
from parsers import knowledge
from parsers.analyze import analyze
from parsers.errors import InputError

NAME = "analyze"
HELP = "name the culprit rank and host of a hang from a bundle"
DESCRIPTION = """Read a bundle (folder or .tar.gz written by 'forensics collect'), or a plain folder of
loose artifacts (NCCL logs, rank stdout/stderr, Flight Recorder dumps, RAS answers, py-spy
dumps, under any names: each file is recognised by its content), and name the rank
that the others wait for: a stopped process, a missing one, one outside every collective
while its peers wait, one in a different collective. Main-thread stacks of all ranks are
merged into a prefix tree so the odd rank out stands alone.

The human output is the verdict block first (summary, culprit and its evidence, other
suspects folded by what they say), then the merged stacks, each line cut to the
terminal's width (--width 0: whole lines). --json prints everything, compact.
"""

EXIT_CODES = {
    0: "a culprit was named",
    1: "internal error (a bug)",
    2: "bad input: not a bundle, a damaged archive, a broken knowledge base, an empty folder",
    4: "the analysis ran but named no culprit",
}


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("path", type=Path, metavar="BUNDLE", help="bundle folder or archive")
    add_output_options(parser, json_help="print the verdict as JSON (schema hang-forensics/analyze/1)")
    parser.add_argument("--no-tree", action="store_true", help="leave the merged stack tree out of the human output")
    parser.add_argument("--width", type=int, default=None, metavar="N",
                        help="cut human output lines to N characters (default: the terminal's width; 0: never)")
    parser.add_argument("--full-logs", action="store_true",
                        help="read every line of logs over 8 MiB (default: their head and tail, which a hang needs)")
    parser.add_argument("--save", action="store_true", help="also write analysis.json into the bundle folder")


def run(args: argparse.Namespace) -> int:
    path = args.path
    try:
        kb = knowledge.load()
    except ValueError as err:  # a user's knowledge-base file ($FORENSICS_KB) is broken
        raise ForensicsError(f"knowledge base: {err}") from err
    try:
        result = analyze(path, kb, log_mode="full" if getattr(args, "full_logs", False) else None)
    except InputError as err:
        raise ForensicsError(str(err)) from err
    verdict = result.verdict
    if result.evidence.manifest is None and not result.evidence.artifacts:
        what = "no logs or dumps in it" if not _has_files(path) else "no file in it that this tool reads"
        raise ForensicsError(f"{path}: not a bundle, and {what}")
    if args.save and not path.is_dir():
        raise ForensicsError(f"{path}: --save writes analysis.json into a folder; this is an archive")
    write_outputs(args, verdict, path)
    # a deadlock names its members: blame is placed, as with a culprit
    return int(ExitCode.OK if verdict.culprit or verdict.deadlock else ExitCode.INCONCLUSIVE)


def write_outputs(args: argparse.Namespace, verdict, root: Path) -> None:
    """--save, then --json or the human text, to stdout or -o/--output."""
    data = verdict.to_dict()
    if args.save:
        try:
            (root / "analysis.json").write_text(json_text("analyze", data, pretty=True) + "\n")
        except OSError as err:
            raise ForensicsError(f"{root}: cannot write analysis.json ({err.strerror or err})") from err
    if args.json:
        emit(json_text("analyze", data, args.pretty), args.output)
        return
    width = args.width
    if width is None:
        width = 0 if args.output else shutil.get_terminal_size().columns
    emit(render_verdict(verdict, show_tree=not args.no_tree, width=width), args.output)


def _has_files(path: Path) -> bool:
    return not path.is_dir() or any(p.is_file() for p in path.rglob("*"))
