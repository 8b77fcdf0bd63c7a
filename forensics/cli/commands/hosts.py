"""`forensics hosts BUNDLE`: which hosts are healthy, suspect or to exclude, and why.

Meant for people and for automated restart jobs alike: --json prints one object
with a per-host status, reasons and action, plus ready-made host lists; the exit
code says whether any host needs attention.
"""

from __future__ import annotations

import argparse
import sys

from forensics.cli.output import add_output_options, emit_json, to_output
from forensics.errors import ForensicsError
from forensics.exitcodes import ExitCode
from parsers import knowledge
from parsers.errors import InputError
from parsers.evidence import load_path
from parsers.judges.hosts import EXCLUDE, HEALTHY, STATUSES, SUSPECT, UNKNOWN, HostReport, exit_status, host_reports

NAME = "hosts"
HELP = "list hosts as healthy / suspect / exclude, with reasons and the action to take"
DESCRIPTION = """List every host of a bundle as healthy, suspect or exclude, with the evidence
behind it (kernel log, nvidia-smi/NVML, InfiniBand, cpufreq, disk, memory, and the
ranks' own logs) matched against the known-failure knowledge base.

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
    parser.add_argument("bundle", help="bundle folder or archive written by 'forensics collect', or a folder of logs")
    add_output_options(parser, json_help="print one JSON object (schema hang-forensics/hosts/1) instead of a table")
    parser.add_argument("--kb", action="append", default=[], metavar="PATH", help="extra knowledge-base file or folder (repeatable; also $FORENSICS_KB)")
    parser.add_argument("--facts", action="store_true", help="with --json: include every decoded host value")


def run(args: argparse.Namespace) -> int:
    try:
        kb = knowledge.load(extra=args.kb)
    except knowledge.KnowledgeError as err:
        raise ForensicsError(f"knowledge base: {err}") from err
    try:
        ev = load_path(args.bundle, kb.line_filter)
    except InputError as err:
        raise ForensicsError(str(err)) from err
    reports = host_reports(ev, kb)
    if not reports:
        raise ForensicsError(f"{args.bundle}: no host evidence and no host named in it")
    overall = exit_status(reports)
    code = _CODES[overall]
    if args.json:
        emit_json("hosts", _json(reports, overall, int(code), args.facts), args)
    else:
        with to_output(args.output):
            _print_table(reports, sys.stdout)
    return int(code)


def _json(reports: list[HostReport], overall: str, code: int, facts: bool) -> dict:
    hosts = []
    for report in reports:
        data = report.to_dict()
        if not facts:
            data.pop("facts", None)
        hosts.append(data)
    lists = {status: [r.host for r in reports if r.status == status] for status in STATUSES}
    return {
        "overall": overall,
        "exit_code": code,
        "hosts": hosts,
        **{status: names for status, names in lists.items()},
        "exclude_list": ",".join(lists[EXCLUDE]),
    }


def _print_table(reports: list[HostReport], out) -> None:
    width = max(len(r.host) for r in reports)
    for report in reports:
        action = report.action or "-"
        print(f"{report.host:<{width}}  {report.status:<8}  {action}", file=out)
        for group in report.reasons:
            print(f"{'':<{width}}    - {group.describe()}", file=out)
            print(f"{'':<{width}}      {group.first.evidence[:160]}", file=out)
        others = [g for g in report.groups if g.entry.host == "none"]
        if others:
            print(f"{'':<{width}}    also seen (no effect on the host): " + ", ".join(f"{g.entry.id}" + (f" x{g.count}" if g.count > 1 else "") for g in others), file=out)
        for note in report.missing:
            print(f"{'':<{width}}    missing: {note}", file=out)
    excluded = [r.host for r in reports if r.status == EXCLUDE]
    if excluded:
        print(f"\nexclude: {','.join(excluded)}", file=out)
