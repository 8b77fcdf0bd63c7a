"""`forensics analyze`: read a bundle and name the culprit rank, its host, and why."""

from __future__ import annotations

import argparse
from pathlib import Path

from forensics import safefs
from forensics.errors import ForensicsError
from forensics.cli.logs import log_reads
from forensics.report.output import add_output_options, emit, emit_document, json_text, text_width
from forensics.exitcodes import ExitCode
from forensics.report.text import render_view
from forensics.report.view import ReportView, build_view
from parsers.scale.focus import FOCUS_MIN_RANKS
from parsers import knowledge
from parsers.pipeline.analyze import analyze
from parsers.input.errors import InputError
from parsers.gather.source import manifest_refusal
from parsers.input.walk import has_files

NAME = "analyze"
HELP = "name the culprit rank and host of a hang from a bundle"
DESCRIPTION = """Read a bundle (folder or .tar.gz written by 'forensics collect'), or a plain folder of
loose artifacts (NCCL logs, rank stdout/stderr, Flight Recorder dumps, RAS answers, py-spy
dumps, under any names: each file is recognised by its content), and name the rank
that the others wait for: a stopped process, a missing one, one outside every collective
while its peers wait, one in a different collective. Main-thread stacks of all ranks are
merged into a prefix tree so the odd rank out stands alone.

The human output is the verdict block first (summary, culprit and its evidence, other
suspects folded by what they say), then the merged stacks. In a terminal the VERDICT
wraps and other long lines are cut to its width (--width 0: whole lines); written to a
file or a pipe (`> out.txt`, `| tee`, a Slurm job's output) nothing is cut. --json
prints everything, compact.

Inputs: a bundle, a folder of logs, a .tar.gz/.tgz/.tar or .zip archive of either, a
single log (plain or .gz), `-` for stdin, or several at once (a bundle plus extra logs).
"""

MAX_SAVES = 100  #: analysis.json, analysis-2.json ... analysis-100.json

EXIT_CODES = {
    0: "a culprit was named",
    1: "internal error (a bug)",
    2: "bad input: not a bundle, a damaged archive, a broken knowledge base, an empty folder",
    3: "no culprit named, and the evidence is partial (files from only some ranks, or the job's size unknown)",
    4: "no culprit named, though the evidence covers every rank of the job",
}


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("path", type=Path, nargs="+", metavar="INPUT",
                        help="bundle folder or archive (.tar.gz, .zip), folder of logs, a log (.gz "
                             "too), '-' for stdin; "
                             "several: a bundle plus extra logs")
    add_output_options(parser, json_help="print the verdict as JSON (schema hang-forensics/analyze/1)")
    parser.add_argument("--no-tree", action="store_true", help="leave the merged stack tree out of the human output")
    parser.add_argument("--width", type=int, default=None, metavar="N",
                        help="cut human output lines to N characters (default: the terminal's width; 0: never)")
    parser.add_argument("--full-logs", action="store_true",
                        help="read every line of logs over 8 MiB (default: their head and tail, which a hang needs)")
    parser.add_argument("--every-rank", action="store_true",
                        help="a bundle of 1,024 ranks or more whose hosts wrote digests is judged over their classes "
                             "(evidence of the odd ones out's hosts and one host a class; the rest counted, not "
                             "listed); this rebuilds every rank's evidence instead (slower: every rank in the tables)")
    parser.add_argument("--no-digests", action="store_true",
                        help="read every raw file and leave the hosts' digests unused (slowest; what an edited or "
                             "planted digest cannot change)")
    parser.add_argument("--save", action="store_true",
                        help="also write analysis.json into the bundle folder (a new file: analysis-2.json and so on "
                             "when taken; only in a folder that is yours alone)")


def run(args: argparse.Namespace) -> int:
    paths = list(args.path)
    path = paths[0] if len(paths) == 1 else paths
    try:
        kb = knowledge.load()
    except ValueError as err:  # a user's knowledge-base file ($FORENSICS_KB) is broken
        raise ForensicsError(f"knowledge base: {err}") from err
    try:
        result = analyze(path, kb, log_mode="full" if getattr(args, "full_logs", False) else None,
                         digests=not getattr(args, "no_digests", False),
                         focus_from=None if getattr(args, "every_rank", False) else FOCUS_MIN_RANKS)
    except InputError as err:
        raise ForensicsError(str(err)) from err
    verdict = result.verdict
    log_reads(result.evidence)
    shown = " ".join(str(p) for p in paths)
    if result.evidence.manifest is None and not result.evidence.artifacts:
        denied = [rel for rel, why in result.evidence.skipped if "permission denied" in why.lower()]
        if denied:
            more = f" and {len(denied) - 3} more" if len(denied) > 3 else ""
            raise ForensicsError(f"{shown}: permission denied: cannot read "
                                 f"{', '.join(denied[:3])}{more} (run as a user "
                                 "who may read it)")
        refused = manifest_refusal(result.evidence.skipped)
        if refused is not None:
            raise ForensicsError(f"{shown}: {refused}, and no other file in it that this tool reads")
        what = ("no logs or dumps in it" if not any(_has_files(p) for p in paths)
                else "no file in it that this tool reads")
        raise ForensicsError(f"{shown}: not a bundle, and {what}")
    if args.save and (len(paths) > 1 or not paths[0].is_dir()):
        raise ForensicsError(f"{shown}: --save writes analysis.json into one bundle folder; this is not one")
    # once: text and JSON render it
    view = build_view(verdict, source=shown, evidence=result.evidence, logs=result.logs)
    write_outputs(args, view, paths[0])
    return int(verdict_code(verdict))


def verdict_code(verdict) -> ExitCode:
    """0 a culprit named; 3 none, and the evidence is partial (more of it may name one); 4 none, though
    the evidence covers the job (docs/exit-codes.md)."""
    if verdict.culprit or verdict.deadlock:  # a deadlock names its members: blame is placed, as with a culprit
        return ExitCode.OK
    coverage = verdict.sections.get("coverage") or {}
    return ExitCode.INCONCLUSIVE if coverage.get("complete") else ExitCode.PARTIAL


def write_outputs(args: argparse.Namespace, view: ReportView, root: Path) -> None:
    """--save, then --json or the human text, to stdout or -o/--output: both from the one view."""
    data = view.to_json()
    if args.save:
        save_analysis(root, json_text("analyze", data, pretty=True) + "\n")
    if args.json:
        emit_document(json_text("analyze", data, args.pretty), args.output)
        return
    width = text_width(args.width, args.output)
    emit(render_view(view, show_tree=not args.no_tree, width=width), args.output)


def save_analysis(root: Path, text: str) -> Path:
    """analysis.json (analysis-2.json... when taken) as a new file (O_CREAT|O_EXCL|O_NOFOLLOW) in a
    bundle folder the caller alone may write to; never through a planted link, never over a file."""
    safefs.private_folder(root, "bundle folder (--save)")
    return safefs.write_first_free(root / "analysis.json", text.encode("utf-8"), MAX_SAVES)


def _has_files(path: Path) -> bool:
    return str(path) == "-" or not path.is_dir() or has_files(path)
