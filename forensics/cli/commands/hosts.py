"""`forensics hosts BUNDLE`: which hosts are healthy, suspect or to exclude, and why.

Meant for people and for automated restart jobs alike: --json prints one object
with a per-host status, reasons and action, plus ready-made host lists; the exit
code says whether any host needs attention.
"""

from __future__ import annotations

import argparse

from forensics.cli.logs import log_reads
from forensics.report.output import add_output_options, emit_json, escape, text_width, to_output
from forensics.report.text import wrap
from forensics.errors import ForensicsError
from forensics.exitcodes import ExitCode
from forensics.hostset import fold
from parsers import knowledge
from parsers.pipeline.analyze import analyze
from parsers.input.errors import InputError
from parsers.judges.hosts import EXCLUDE, HEALTHY, STATUSES, SUSPECT, UNKNOWN, HostReport, exit_status, plain_host
from parsers.model.events import UNKNOWN_HOST

NAME = "hosts"
HELP = "list hosts as healthy / suspect / exclude, with reasons and the action to take"
DESCRIPTION = """List every host of a bundle as healthy, suspect or exclude, with the evidence
behind it (kernel log, nvidia-smi/NVML, InfiniBand, cpufreq, disk, memory, and the
ranks' own logs) matched against the known-failure knowledge base.

The hosts and their status are analyze's (one pipeline, the same judges); the host of
the culprit analyze names is listed. Hosts whose lines are identical share one line,
folded as `clush -b` does (`node[001-064]`). Host lists (--json's exclude_list, the
per-status lists, the `exclude:` line) hold plain host names only: the placeholder for
lines no host names, or a name that is not a host name, is said in words, never listed.

A restart job branches on the exit code: 0 go on, 5 act on the hosts listed
(the JSON's exclude_list / suspect lists), 3 look closer (a host had no usable evidence).
"""

EXIT_CODES = {
    0: "every host is healthy",
    1: "internal error (a bug)",
    2: "bad input: not a bundle, unreadable manifest, broken knowledge-base file, no hosts",
    3: "no host is suspect or excluded, but some host has no usable evidence (unknown)",
    5: "hosts to act on: at least one host is suspect or to be excluded (command-specific)",
}

_CODES = {HEALTHY: ExitCode.OK, UNKNOWN: ExitCode.PARTIAL, SUSPECT: ExitCode.BAD_HOSTS, EXCLUDE: ExitCode.BAD_HOSTS}


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("bundle", nargs="+", metavar="INPUT",
                        help="bundle folder or archive (.tar.gz, .zip) written by 'forensics collect', a "
                             "folder of logs, "
                             "a log (.gz too), '-' for stdin; several: a bundle plus extra logs")
    add_output_options(parser, json_help="print one JSON object (schema hang-forensics/hosts/1) instead of a table")
    parser.add_argument("--kb", action="append", default=[], metavar="PATH",
                        help="extra knowledge-base file or folder (repeatable; also $FORENSICS_KB)")
    parser.add_argument("--facts", action="store_true", help="with --json: include every decoded host value")
    parser.add_argument("--width", type=int, default=None, metavar="N",
                        help="cut text lines to N characters with '…' (default: the terminal's width; off a "
                             "terminal and 0: never)")


def run(args: argparse.Namespace) -> int:
    try:
        kb = knowledge.load(extra=args.kb)
    except knowledge.KnowledgeError as err:
        raise ForensicsError(f"knowledge base: {err}") from err
    paths = list(args.bundle)
    try:  # the same pipeline as analyze: the same host reports, and the culprit analyze names
        result = analyze(paths[0] if len(paths) == 1 else paths, kb)
    except InputError as err:
        raise ForensicsError(str(err)) from err
    log_reads(result.evidence)
    reports = list(result.hosts)
    culprit = result.verdict.culprit
    if (culprit is not None and culprit.host and plain_host(culprit.host)
            and culprit.host not in {r.host for r in reports}):
        reports.append(HostReport(host=culprit.host, status=UNKNOWN))  # analyze names it: it is listed here too
        reports.sort(key=lambda r: r.host)
    if not reports:
        raise ForensicsError(f"{' '.join(paths)}: no host evidence and no host named in it")
    overall = exit_status(reports)
    code = _CODES[overall]
    if args.json:
        emit_json("hosts", _json(reports, overall, int(code), args.facts, culprit), args)
    else:
        with to_output(args.output):
            for line in wrap(table_lines(reports, culprit), text_width(args.width, args.output)):  # acted on: never cut
                print(line)
    return int(code)


def _json(reports: list[HostReport], overall: str, code: int, facts: bool, culprit=None) -> dict:
    """The hosts object; the per-status lists and exclude_list hold plain host names only (never the
    placeholder of lines no host names, never a name that is not a host name): they are fed to schedulers."""
    hosts = []
    for report in reports:
        data = report.to_dict()
        data["listed"] = plain_host(report.host)
        if not facts:
            data.pop("facts", None)
        hosts.append(data)
    lists = {status: [r.host for r in reports if r.status == status and plain_host(r.host)] for status in STATUSES}
    return {
        "overall": overall,
        "exit_code": code,
        "hosts": hosts,
        **{status: names for status, names in lists.items()},
        "exclude_list": ",".join(lists[EXCLUDE]),
        "not_listed": [{"host": r.host, "status": r.status, "why": _unlisted_why(r.host)}
                       for r in reports if not plain_host(r.host)],
        "culprit": None if culprit is None else {"rank": culprit.rank,
                                                 "host": culprit.host if plain_host(culprit.host) else None,
                                                 "reason_class": str(culprit.reason_class)},
    }


def _unlisted_why(host: str) -> str:
    if host == UNKNOWN_HOST:
        return "no line or file names the host of this evidence"
    return "not a plain host name (letters, digits, '.', '-', '_'; no leading '-'): never put in a host list"


def shown_host(host: str) -> str:
    """A host as the table shows it: the name, or words for the placeholder (escaped later, with the line)."""
    return "(host not in the evidence)" if host == UNKNOWN_HOST else host


def table_lines(reports: list[HostReport], culprit=None) -> list[str]:
    """A header row, then one block per set of hosts whose blocks are identical, the hosts folded as
    `clush -b` does (`node[001-064]  unknown  -`); an `exclude:` line of plain host names last."""
    blocks: dict[tuple, list[str]] = {}
    for report in reports:
        blocks.setdefault((report.status, report.action or "-", tuple(_body(report))), []).append(report.host)
    rows = [(_names(hosts), status, action, body) for (status, action, body), hosts in blocks.items()]
    rows = [(escape(name), status, action, body) for name, status, action, body in rows]  # aligned as shown
    width = max([len("HOST")] + [len(name) for name, *_ in rows])
    lines = [f"{'HOST':<{width}}  {'STATUS':<8}  ACTION"]
    for name, status, action, body in rows:
        lines.append(f"{name:<{width}}  {status:<8}  {action}")
        lines += [f"{'':<{width}}    {b}" for b in body]
    if culprit is not None:
        where = culprit.host if plain_host(culprit.host) else "a host no evidence names"
        lines.append(f"\nanalyze names rank {culprit.rank} on {shown_host(where)} as the culprit "
                     f"({culprit.reason_class})")
    excluded = [r.host for r in reports if r.status == EXCLUDE and plain_host(r.host)]
    unnamed = [r.host for r in reports if r.status == EXCLUDE and not plain_host(r.host)]
    if unnamed:
        lines.append("")
    for host in unnamed:
        lines.append("not excluded by name: " + ("the host of lines that name no host (find it from "
                                                 "where the lines came)"
                                                   if host == UNKNOWN_HOST else f"{host} (not a plain host name)"))
    if excluded:
        lines.append(f"\nexclude: {fold(excluded)}")
    return lines


def _names(hosts: list[str]) -> str:
    """Plain names folded (node[001-064]); others listed as they are (escaped where printed)."""
    plain = [h for h in hosts if plain_host(h)]
    other = [shown_host(h) for h in hosts if not plain_host(h)]
    return ",".join(([fold(plain)] if plain else []) + other)


def _body(report: HostReport) -> list[str]:
    """The lines under a host. Its own name in a cited path is said as '<host>', so hosts whose blocks differ
    only there (node007/kernel.log:1, node031/kernel.log:1) share one block, as `clush -b` folds output; findings
    seen again on other subjects are counted, not repeated."""
    out = []
    for group in report.reasons:
        out.append(f"- {_own_path(group.describe(), report.host)}")
        out.append(f"  {group.first.evidence}")
    counts: dict[str, int] = {}
    for g in report.groups:
        if g.entry.host == "none":
            counts[g.entry.id] = counts.get(g.entry.id, 0) + g.count
    if counts:
        out.append("also seen (no effect on the host): "
                   + ", ".join(f"{k} x{n}" if n > 1 else k for k, n in counts.items()))
    out += [f"missing: {note}" for note in report.missing]
    out += [_own_path(note, report.host) for note in report.kernel_times]
    return out


def _own_path(text: str, host: str) -> str:
    """`text` with the host's own folder in a citation ('[node007/kernel.log:1]') said as '<host>/'."""
    return text.replace(f"[{host}/", "[<host>/") if plain_host(host) else text
