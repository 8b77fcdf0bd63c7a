"""`forensics recorder` (alias `nccl-plugin`, its first name): build, locate and enable the recorder; read its files."""

from __future__ import annotations

import argparse
import shlex
import sys
from pathlib import Path

from forensics import recorder_build
from forensics.report.output import add_output_options, emit_json, to_output, escape
from forensics.errors import ForensicsError
from forensics.exitcodes import ExitCode
from parsers.readers.recorder import RecorderFormatError, read_recorder_file
from parsers.judges.recorder import analyse
from parsers.input.walk import walk_files

NAME = "recorder"
#: earlier names of the command, still accepted (scripts and runbooks call `forensics nccl-plugin`)
ALIASES = ("nccl-plugin",)
HELP = "build/locate the recorder (NCCL profiler plugin), print its env, or read its state files"
DESCRIPTION = """The recorder is an NCCL profiler plugin (interfaces v2-v6: NCCL 2.24-2.30)
that keeps each communicator's in-flight operations in a file under /dev/shm,
readable while the job hangs. Actions:
  path    print the plugin's path (builds it with gcc if needed)
  build   (re)build the plugin (and --preload: the LD_PRELOAD shim for NCCL < 2.23)
  env     print the export lines a rank needs (eval "$(forensics recorder env)");
          --chain PLUGIN_SO also forwards every profiler call to a second plugin
  read    decode state files or folders of them; --json for data, default: text + analysis
"""

EXIT_CODES = {
    0: "done (read: at least one state file decoded)",
    1: "internal error (a bug)",
    2: "bad input: no files named, none decodable (a folder with no state file), no C compiler for build",
}


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("action", choices=["path", "build", "env", "read"], help="what to do (see the list above)")
    parser.add_argument("files", nargs="*", help="read: state files (.bin) or folders holding them")
    parser.add_argument("--dir", help="env: where ranks write state files (default /dev/shm)")
    parser.add_argument("--chain", metavar="PLUGIN_SO",
                        help="env: a second NCCL profiler plugin (e.g. NCCL's Inspector) the recorder forwards "
                             "every call to, so both run (FORENSICS_RECORDER_CHAIN)")
    parser.add_argument("--cc", help="build: C compiler (default $CC or gcc)")
    parser.add_argument("--force", action="store_true", help="build: rebuild even if up to date")
    parser.add_argument("--preload", action="store_true", help="build/path: the LD_PRELOAD shim instead")
    add_output_options(parser, json_help="read: print JSON (schema hang-forensics/nccl-plugin-read/1)")
    # the JSON keeps its first format id: it is a published contract, which a new command name does not change


def run(args: argparse.Namespace) -> int:
    if args.action == "read":
        return _read(args.files, args)
    with to_output(args.output):
        return _other(args)


def _other(args: argparse.Namespace) -> int:
    name = recorder_build.PRELOAD_NAME if args.preload else recorder_build.PLUGIN_NAME
    if args.action == "build":
        print(recorder_build.build(name, cc=args.cc, force=args.force))
    elif args.action == "path":
        print(recorder_build.build(name, cc=args.cc) if args.preload else recorder_build.plugin_path())
    elif args.action == "env":
        for key, value in recorder_build.plugin_env(args.dir, chain=args.chain).items():
            print(f"export {key}={shlex.quote(value)}")
    return ExitCode.OK


def _read(targets: list[str], args: argparse.Namespace) -> int:

    if not targets:
        raise ForensicsError("read: name state files or folders")
    paths: list[Path] = []
    states, problems = [], []
    for t in targets:
        p = Path(t)
        paths.extend(sorted(walk_files(p, "nccl-recorder.*.bin", cut=problems)) if p.is_dir() else [p])
    for p in paths:
        try:
            states.append(read_recorder_file(p))
        except RecorderFormatError as err:
            problems.append(str(err))
    as_of = date_states(states, paths)
    stalls = analyse(states) if states else []
    if args.json:
        out = {
            "as_of": as_of,
            "states": [s.to_dict() for s in states],
            "problems": problems,
            "stalls": [
                {"comm_id": s.comm_id, "op": s.op, "edges": [e.__dict__ for e in s.edges],
                 "suspects": [x.to_dict() for x in s.suspects]}
                for s in stalls
            ],
        }
        emit_json("nccl-plugin-read", out, args)
    else:
        with to_output(args.output):
            if as_of:
                print(f"times: measured from {as_of}")
            for line in _read_lines(states, stalls):
                print(escape(line))  # host and communicator names come from the files
    for p in problems:
        print(f"problem: {p}", file=sys.stderr)
    for s in states:
        for note in s.notes:  # read all the same: what its header contradicts
            print(escape(f"note: {s.path}: {note}"), file=sys.stderr)
    if not states:  # nothing decoded: a folder with no state file in it is bad input too (docs/exit-codes.md)
        if not problems:
            print(f"forensics {getattr(args, 'command', None) or NAME}: error: no recorder state file "
                  f"(nccl-recorder.*.bin) in {' '.join(targets)}",
                  file=sys.stderr)
        return ExitCode.BAD_INPUT
    return ExitCode.OK


#: a state file with a heartbeat this recent is being written now: its ages are measured from now
LIVE_S = 10.0


def date_states(states: list, paths: list[Path]) -> str | None:
    """Measure ages from the moment the files show, not from this read, unless they are live.

    Files read where a running job writes them (a heartbeat within LIVE_S of now) are measured
    from now. Copies (or a job that no longer beats) are dated by their newest heartbeat, the last
    moment they show a live process, the same for every file (a stopped rank's heartbeat stopped
    with it), so reading them again next week gives the same ages. File times are not used: a
    checkout or a plain copy makes them the time of the copy. Returns the words for that moment,
    or None when measured from now."""
    import datetime as dt
    import time

    if not states:
        return None
    newest_beat = max(s.heartbeat_ns for s in states)
    if time.time_ns() - newest_beat <= LIVE_S * 1e9:
        return None
    for s in states:
        s.observed_ns, s.observed_is_copy = newest_beat, True
    stamp = dt.datetime.fromtimestamp(newest_beat / 1e9, dt.timezone.utc).strftime("%Y-%m-%d %H:%M:%S UTC")
    return f"{stamp} (the newest heartbeat of these files; none is being written now)"


def _read_lines(states: list, stalls: list) -> list[str]:
    """The text of `read`: each state file, its in-flight proxy ops, then each stall."""
    out: list[str] = []
    for s in states:
        out.append(f"{s.path}: comm {s.comm_hex} {s.comm_name!r} rank {s.rank}/{s.nranks} pid {s.pid} "
                   f"host {s.hostid or s.host} {s.comm_state}, {len(s.colls)} ops, {len(s.in_flight_ops)} "
                   f"proxy ops in flight")
        for op in s.in_flight_ops:
            out.append(f"  ch {op.channel} {op.direction} peer {op.peer} {op.func} seq {op.coll_seq} "
                       f"{op.last_state} step {op.last_step} ({op.steps_done}/{op.n_steps})")
    for stall in stalls:
        out.append(f"comm {stall.comm_id}: stuck op {stall.op}")
        for e in stall.edges:
            out.append(f"  rank {e.waiter} -> rank {e.peer} ch {e.channel} {e.state}: {e.detail}")
        for x in stall.suspects:
            out.append(f"  suspect {x.label}: {x.reason} [{x.reason_class}, {x.confidence:.2f}]")
    return out
