"""Entry point of the `forensics` command.

Subcommands live one per module in `forensics.cli.commands`; each module defines
NAME, HELP, add_arguments(parser), run(args) -> int and EXIT_CODES (code -> meaning,
shown in its --help), and may define ALIASES (its earlier names, still accepted and
shown beside NAME in --help). They are discovered here, so adding a command never
edits this file.

What every command gets from here: -v/--verbose logging (loguru, on stderr), a
temporary folder that is removed when the command ends, however it ends, and a
quiet exit when stdout is closed early (`forensics hosts B | head -1`).
"""

from __future__ import annotations

import argparse
import importlib
import os
import pkgutil
import sys
import traceback
from types import ModuleType

from forensics import __version__
from forensics.cli import commands, ending
from forensics.cli.logs import setup_logging
from forensics.report.text import escape
from forensics.exitcodes import SHARED, ExitCode, code_for, help_epilog
from parsers.input.errors import HangForensicsError

EPILOG = help_epilog("COMMAND", {int(k): v for k, v in SHARED.items()}).replace(
    "exit codes of 'forensics COMMAND'", "exit codes shared by every command") + (
    "  5   hosts, bisect: hosts to act on were found\n"
    "  6   collect --hosts/--slurm-job: no host answered\n"
    "each command's --help lists its own.\n")


#: the order a person uses the commands in during a hang, which --help lists them in (any other after, by name)
WORKFLOW = ("collect", "analyze", "hosts", "report", "bisect", "demo", "ras", "recorder", "env", "steps")

#: the one example --help shows: the recipe of the README's first screen
EXAMPLE = ("during a hang (on one host; --slurm-job ID or --hosts 'node[001-064]' for the whole job):\n"
           "  forensics collect -o /tmp/hang     # before the watchdog kills the ranks\n"
           "  forensics analyze /tmp/hang        # the culprit rank and host, and why\n"
           "  forensics hosts /tmp/hang          # hosts to exclude, and the action\n"
           "  forensics report /tmp/hang         # one HTML file to share\n"
           "'forensics help COMMAND' (or COMMAND --help) says more about each.\n\n")


def _command_modules() -> list[ModuleType]:
    """Import every subcommand module, in workflow order (WORKFLOW), then by name, for a stable --help."""
    found = []
    for info in pkgutil.iter_modules(commands.__path__):
        if info.name.startswith("_"):
            continue
        module = importlib.import_module(f"{commands.__name__}.{info.name}")
        if hasattr(module, "NAME") and hasattr(module, "run"):
            found.append(module)
    return sorted(found, key=lambda m: (WORKFLOW.index(m.NAME) if m.NAME in WORKFLOW else len(WORKFLOW), m.NAME))


def help_argv(argv: list[str]) -> list[str]:
    """`forensics help [COMMAND]` as the argv argparse knows: `COMMAND --help`, or `--help`."""
    if argv[:1] == ["help"]:
        return [*argv[1:2], "--help"]
    return argv


def _named_command(argv: list[str]) -> list[ModuleType] | None:
    """[the module of the command `argv` names], importing it alone; None where argv names none by its
    module's name (--help, an alias, a typo): then every command is imported for the full parser.

    Why: importing every command (collect's collectors, the fleet, bisect, the report) took 1.3-1.7 s of
    `forensics analyze`'s 3 s on the dev VM: time to verdict is a budget (issue 39 item 8)."""
    first = next((a for a in argv if not a.startswith("-")), None)
    if first is None or first.startswith("_") or not first.replace("-", "_").isidentifier():
        return None
    if first.replace("-", "_") not in {info.name for info in pkgutil.iter_modules(commands.__path__)}:
        return None
    module = importlib.import_module(f"{commands.__name__}.{first.replace('-', '_')}")
    return [module] if getattr(module, "NAME", None) == first and hasattr(module, "run") else None


def _verbose_option(parser: argparse.ArgumentParser, top: bool) -> None:
    # SUPPRESS on the subcommand, so `forensics -v analyze` is not reset by the subparser's default
    parser.add_argument("-v", "--verbose", action="count", default=0 if top else argparse.SUPPRESS,
                        help="log what happens on stderr (-vv: debug)")


def build_parser(modules: list[ModuleType] | None = None) -> argparse.ArgumentParser:
    """The top-level parser with one subparser per discovered command (or per module of `modules`)."""
    parser = argparse.ArgumentParser(
        prog="forensics",
        description="Find which rank and which host hung or crashed a distributed job, and why.",
        epilog=EXAMPLE + EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--version", action="version", version=f"hang-forensics {__version__}")
    _verbose_option(parser, top=True)
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for module in modules or _command_modules():
        codes = getattr(module, "EXIT_CODES", None) or {int(k): v for k, v in SHARED.items()}
        cmd = sub.add_parser(
            module.NAME,
            aliases=list(getattr(module, "ALIASES", ())),
            help=module.HELP,
            description=getattr(module, "DESCRIPTION", module.HELP),
            epilog=help_epilog(module.NAME, codes),
            formatter_class=argparse.RawDescriptionHelpFormatter,
        )
        module.add_arguments(cmd)
        _verbose_option(cmd, top=False)
        cmd.set_defaults(_run=module.run)
    return parser


def main(argv: list[str] | None = None) -> int:
    """Parse arguments, run one command, map expected failures to exit codes."""
    argv = help_argv(list(sys.argv[1:] if argv is None else argv))
    parser = build_parser(_named_command(argv))
    args = parser.parse_args(argv)
    if not getattr(args, "_run", None):
        parser.print_help()
        return int(ExitCode.BAD_INPUT)
    setup_logging(args.verbose)
    previous = ending.install()  # SIGTERM and SIGHUP unwind like Ctrl-C: every finally runs, exit 143 / 129
    try:
        return _run_command(args)
    finally:
        ending.restore(previous)


def _run_command(args: argparse.Namespace) -> int:
    """Run the parsed command in its scoped temp folder; map expected failures and signals to exit codes."""
    try:
        with ending.scoped_tempdir():
            code = int(args._run(args))
            sys.stdout.flush()  # a closed pipe shows here, not at interpreter exit
            return code
    except BrokenPipeError:
        return _pipe_closed()
    except HangForensicsError as err:  # every expected failure (ForensicsError included): code_for maps it
        print(escape(f"forensics {args.command}: error: {err}"), file=sys.stderr)  # errors quote data: escaped
        return int(code_for(err))
    except PermissionError as err:
        print(escape(f"forensics {args.command}: error: permission denied: {err.filename or err}"), file=sys.stderr)
        return int(ExitCode.BAD_INPUT)
    except KeyboardInterrupt as err:  # Ctrl-C, or SIGTERM/SIGHUP (ending.Terminated)
        how = "" if ending.signal_name(err) == "SIGINT" else f" by {ending.signal_name(err)}"
        print(f"forensics {args.command}: interrupted{how}", file=sys.stderr)
        return ending.exit_code(err)
    except Exception as err:  # noqa: BLE001 - a bug: exit 1 as docs/exit-codes.md says, the traceback kept for the report
        traceback.print_exc()
        print(f"forensics {args.command}: internal error (a bug; please report it with the traceback above): "
              + escape(f"{type(err).__name__}: {err}"), file=sys.stderr)
        return int(ExitCode.FAILURE)


def _pipe_closed() -> int:
    """The reader went away (`| head`): say nothing, and keep Python from complaining at exit."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    except OSError:
        pass
    return int(ExitCode.PIPE_CLOSED)


if __name__ == "__main__":
    sys.exit(main())
