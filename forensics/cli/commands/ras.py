"""`forensics ras`: ask a hung NCCL job's RAS service who lags, right now."""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys

from forensics.report.output import add_output_options, emit, emit_json
from forensics.errors import ForensicsError
from forensics.exitcodes import ExitCode
from forensics.ras_client import DEFAULT_ADDR, RasError, query
from parsers.readers import ras

NAME = "ras"
HELP = "query NCCL RAS (2.24+) of a running job: which ranks lag or are missing"
DESCRIPTION = """Query the NCCL RAS service of a running job over its text protocol
(no ncclras binary needed) and print its report. With --json, the report is asked
for in JSON (NCCL 2.28.7+) and printed with our parsed findings.

RAS ranks are communicator ranks; `forensics analyze` maps them to global ranks.
--verbose-status asks RAS for VERBOSE STATUS (-v/--verbose is logging, as everywhere)."""

EXIT_CODES = {
    0: "RAS answered (its report is printed)",
    1: "internal error (a bug)",
    3: "RAS answered, but its report was cut (too large, too slow, or it stopped mid-report): what came is printed",
    2: "bad input: no RAS service at --addr, a refused connection, a malformed answer",
}


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--addr", default=DEFAULT_ADDR, help=f"host:port of the RAS service (default {DEFAULT_ADDR})")
    add_output_options(parser, json_help="ask for JSON and print parsed findings as JSON (schema hang-forensics/ras/1)")
    parser.add_argument("--verbose-status", action="store_true", help="VERBOSE STATUS (lists more ranks)")
    parser.add_argument("--timeout", type=float, default=10.0, help="seconds to wait for each read (default 10)")


def run(args: argparse.Namespace) -> int:
    try:
        answer = query(args.addr, verbose=args.verbose_status, json_format=args.json, timeout=args.timeout)
    except RasError as err:
        raise ForensicsError(str(err), ExitCode.BAD_INPUT) from None
    done = ExitCode.OK
    if answer.cut:
        print(f"forensics ras: the report is cut: {answer.cut}", file=sys.stderr)
        done = ExitCode.PARTIAL
    if not args.json:
        emit(answer.text, args.output)  # a report from the network: emit escapes what reaches the terminal
        return int(done)

    parsed = ras.parse_json_text(answer.text)
    body = answer.text[answer.text.find("{"):]
    try:
        report = json.loads(body)
    except ValueError:
        try:  # NCCL 2.28.9 drops commas in missing_ranks entries: the very case RAS is asked about
            report = json.loads(ras.repair_json(body))
        except ValueError:
            report = answer.text
    out = {"addr": answer.addr, "command": answer.command, "seconds": round(answer.seconds, 3), "cut": answer.cut,
           "report": report,
           "findings": [dataclasses.asdict(f) for f in parsed.events if f.kind != "count"],
           "counts": {str(f.comm_rank): f.op_count for f in parsed.events if f.kind == "count"},
           "problems": parsed.problems}
    emit_json("ras", out, args)
    return int(done)
