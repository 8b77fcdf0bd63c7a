"""`forensics report`: one self-contained HTML file with the verdict, pictures and tables."""

from __future__ import annotations

import argparse
from pathlib import Path

from forensics.cli.commands.analyze import verdict_code
from forensics.cli.logs import log_reads
from forensics.cli.output import escape
from forensics.errors import ForensicsError

NAME = "report"
HELP = "write a self-contained HTML report (verdict, wait-for graph, stacks, timeline) of a bundle"
DESCRIPTION = """Analyse a bundle (folder or .tar.gz/.zip), a folder of loose artifacts (logs, dumps), a single
log (.gz too), stdin ('-'), or a bundle plus extra logs, and write one HTML file that needs no network to view: the verdict, the wait-for graph
with the culprit in red, the last operation each rank reached, the merged stack tree with
rank counts per branch, and the rank tables. Pictures are inline SVG drawn in pure Python
(the base install is enough); large jobs are collapsed into classes of like ranks.
"""

EXIT_CODES = {
    0: "the report was written and names a culprit",
    1: "internal error (a bug)",
    2: "bad input: not a bundle, a damaged archive, an empty folder; or the report cannot be written",
    3: "the report was written, names no culprit, and the evidence is partial (as analyze)",
    4: "the report was written and names no culprit, though the evidence covers every rank",
}


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("path", type=Path, nargs="+", metavar="INPUT",
                        help="bundle folder, loose folder of logs and dumps, an archive (.tar.gz, .zip) of either, a log "
                             "(.gz too), '-' for stdin (then -o is needed); several: a bundle plus extra logs")
    parser.add_argument("-o", "--out", "--output", dest="out", type=Path, default=None,
                        help="HTML file to write (default: BUNDLE/report.html; NAME.html beside an archive)")


def run(args: argparse.Namespace) -> int:
    from forensics.postmortem import load

    paths = list(args.path)
    if args.out is None and str(paths[0]) == "-":
        raise ForensicsError("-: reading stdin, name the report file with -o FILE")
    pm = load(paths)
    log_reads(pm.evidence)
    out = args.out or default_output(paths[0])
    try:
        written = pm.report(out)
    except OSError as err:
        raise ForensicsError(f"{out}: cannot write the report ({err.strerror or err})") from err
    print(escape(f"report: {written}"))
    print(escape(f"VERDICT: {pm.summary}"))
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
