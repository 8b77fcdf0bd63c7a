"""`forensics analyze`: read a bundle and name the culprit rank, its host, and why."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from forensics.errors import ForensicsError
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

exit code 0 when a culprit is named, 4 when none could be, 2 when PATH is not a valid bundle.
"""


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("path", type=Path, metavar="BUNDLE", help="bundle folder or archive")
    parser.add_argument("--json", action="store_true", help="print the verdict as JSON on stdout")
    parser.add_argument("--no-tree", action="store_true", help="leave the merged stack tree out of the human output")
    parser.add_argument("--save", action="store_true", help="also write analysis.json into the bundle folder")


def run(args: argparse.Namespace) -> int:
    path = args.path
    try:
        kb = knowledge.load()
    except ValueError as err:  # a user's knowledge-base file ($FORENSICS_KB) is broken
        raise ForensicsError(f"knowledge base: {err}") from err
    try:
        result = analyze(path, kb)
    except InputError as err:
        raise ForensicsError(str(err)) from err
    verdict = result.verdict
    if result.evidence.manifest is None and not result.evidence.artifacts:
        what = "no logs or dumps in it" if not _has_files(path) else "no file in it that this tool reads"
        raise ForensicsError(f"{path}: not a bundle, and {what}")
    data = verdict.to_dict()
    if args.save:
        if not path.is_dir():
            raise ForensicsError(f"{path}: --save writes analysis.json into a folder; this is an archive")
        (path / "analysis.json").write_text(json.dumps(data, indent=1) + "\n")
    if args.json:
        print(json.dumps(data, indent=1))
    else:
        print(render_verdict(verdict, show_tree=not args.no_tree))
    return int(ExitCode.OK if verdict.culprit else ExitCode.INCONCLUSIVE)


def _has_files(path: Path) -> bool:
    return not path.is_dir() or any(p.is_file() for p in path.rglob("*"))
