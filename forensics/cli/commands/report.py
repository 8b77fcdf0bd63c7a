"""`forensics report`: one self-contained HTML file with the verdict, pictures and tables."""

from __future__ import annotations

import argparse
from pathlib import Path

from forensics.errors import ForensicsError
from forensics.exitcodes import ExitCode

NAME = "report"
HELP = "write a self-contained HTML report (verdict, wait-for graph, stacks, timeline) of a bundle"
DESCRIPTION = """Analyse a bundle (folder or .tar.gz) and write one HTML file that needs no network
to view: the verdict, the wait-for graph with the culprit in red, the last operation each
rank reached, the merged stack tree with rank counts per branch, and the rank tables.
Pictures are inline SVG; large jobs are collapsed into classes of like ranks.

exit code 0 when a culprit is named, 4 when none could be (the report is written either
way), 2 when BUNDLE is not a valid bundle. Needs matplotlib (pip install 'hang-forensics[notebook]').
"""


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("path", type=Path, metavar="BUNDLE", help="bundle folder or archive")
    parser.add_argument("-o", "--out", type=Path, default=None, help="HTML file to write (default: BUNDLE/report.html)")


def run(args: argparse.Namespace) -> int:
    try:
        import matplotlib  # noqa: F401
    except ImportError as err:
        raise ForensicsError("forensics report needs matplotlib: pip install 'hang-forensics[notebook]'", ExitCode.FAILURE) from err
    from forensics.postmortem import load

    pm = load(args.path)
    out = args.out or default_output(args.path)
    try:
        written = pm.report(out)
    except OSError as err:
        raise ForensicsError(f"{out}: cannot write the report ({err.strerror or err})") from err
    print(f"report: {written}")
    print(f"VERDICT: {pm.summary}")
    return int(ExitCode.OK if pm.culprit else ExitCode.INCONCLUSIVE)


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
