"""`forensics report`: one self-contained HTML file with the verdict, pictures and tables."""

from __future__ import annotations

import argparse
from pathlib import Path

from forensics import safefs
from forensics.cli.commands.analyze import verdict_code
from forensics.cli.logs import log_reads
from forensics.report.output import escape
from forensics.errors import ForensicsError
from forensics.report.postmortem import load
from forensics.report.html import build_report

NAME = "report"
HELP = "write a self-contained HTML report (verdict, wait-for graph, stacks, timeline) of a bundle"
DESCRIPTION = """Analyse a bundle (folder or .tar.gz/.zip), a folder of loose artifacts (logs, dumps), a single
log (.gz too), stdin ('-'), or a bundle plus extra logs, and write one HTML file that needs no network to view:
the verdict, the wait-for graph with the culprit in red, the last operation each rank reached, the merged stack
tree with rank counts per branch, and the rank tables. Pictures are inline SVG drawn in pure Python
(the base install is enough); large jobs are collapsed into classes of like ranks.
"""

MAX_NAMES = 100  #: report.html, report-2.html ... report-100.html

EXIT_CODES = {
    0: "the report was written and names a culprit",
    1: "internal error (a bug)",
    2: "bad input: not a bundle, a damaged archive, an empty folder; or the report cannot be written",
    3: "the report was written, names no culprit, and the evidence is partial (as analyze)",
    4: "the report was written and names no culprit, though the evidence covers every rank",
}


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("path", type=Path, nargs="+", metavar="INPUT",
                        help="bundle folder, loose folder of logs and dumps, an archive (.tar.gz, .zip) "
                             "of either, a log "
                             "(.gz too), '-' for stdin (then -o is needed); several: a bundle plus extra logs")
    parser.add_argument("-o", "--out", "--output", dest="out", type=Path, default=None,
                        help="HTML file to write, a new file (default: BUNDLE/report.html, or report-2.html and so on "
                             "when taken; NAME.html beside an archive; only in a folder that is yours alone)")


def run(args: argparse.Namespace) -> int:
    paths = list(args.path)
    if args.out is None and str(paths[0]) == "-":
        raise ForensicsError("-: reading stdin, name the report file with -o FILE")
    pm = load(paths)
    log_reads(pm.evidence)
    text = build_report(pm.view)
    written = write_new_report(args.out, text) if args.out else write_default_report(paths[0], text)
    print(escape(f"report: {written}"))
    print(escape(f"VERDICT: {pm.view.headline}"))
    return int(verdict_code(pm.verdict))


def default_output(bundle: Path) -> Path:
    """BUNDLE/report.html for a folder, NAME.html beside a NAME.tar.gz archive."""
    if bundle.is_dir():
        return bundle / "report.html"
    name = bundle.name
    for suffix in (".tar.gz", ".tgz", ".tar"):
        if name.endswith(suffix):
            name = name[: -len(suffix)]
            break
    return bundle.with_name(name + ".html")


def write_new_report(path: Path, text: str) -> Path:
    """`text` into a new file `path` (O_CREAT|O_EXCL|O_NOFOLLOW): an existing name or a planted
    link is refused, never followed or overwritten."""
    try:
        safefs.write_new(path, text.encode("utf-8"))
    except OSError as err:
        raise ForensicsError(f"{path}: cannot write the report ({err.strerror or err})") from err
    return path


def write_default_report(bundle: Path, text: str) -> Path:
    """The report where default_output says, in a folder the caller alone may write to (a
    bundle of another user, or a shared folder such as /tmp, is refused: give -o); a taken
    name gives way to report-2.html, report-3.html..., never overwritten."""
    first = default_output(bundle)
    safefs.private_folder(first.parent, "folder of the default report")
    return safefs.write_first_free(first, text.encode("utf-8"), MAX_NAMES)
