"""Entry point of the `forensics` command.

Subcommands live one per module in `forensics.cli.commands`; each module defines
NAME, HELP, add_arguments(parser) and run(args) -> int. They are discovered here,
so adding a command never edits this file.
"""

from __future__ import annotations

import argparse
import importlib
import pkgutil
import sys
from types import ModuleType

from forensics import __version__
from forensics.errors import ForensicsError
from forensics.exitcodes import ExitCode
from forensics.cli import commands

EPILOG = """exit codes (all commands):
  0  done; for analyze/demo: a culprit was named
  1  internal error (a bug)
  2  bad arguments or input (unknown PID, not a bundle, corrupt manifest, no ranks found)
  3  bundle written, but some evidence is missing (see manifest.json)
  4  analysis ran but named no culprit
"""


def _command_modules() -> list[ModuleType]:
    """Import every subcommand module, sorted by name for a stable --help."""
    found = []
    for info in pkgutil.iter_modules(commands.__path__):
        if info.name.startswith("_"):
            continue
        module = importlib.import_module(f"{commands.__name__}.{info.name}")
        if hasattr(module, "NAME") and hasattr(module, "run"):
            found.append(module)
    return sorted(found, key=lambda m: m.NAME)


def build_parser() -> argparse.ArgumentParser:
    """The top-level parser with one subparser per discovered command."""
    parser = argparse.ArgumentParser(
        prog="forensics",
        description="Find which rank and which host hung or crashed a distributed job, and why.",
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--version", action="version", version=f"hang-forensics {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for module in _command_modules():
        cmd = sub.add_parser(
            module.NAME,
            help=module.HELP,
            description=getattr(module, "DESCRIPTION", module.HELP),
            epilog=EPILOG,
            formatter_class=argparse.RawDescriptionHelpFormatter,
        )
        module.add_arguments(cmd)
        cmd.set_defaults(_run=module.run)
    return parser


def main(argv: list[str] | None = None) -> int:
    """Parse arguments, run one command, map expected failures to exit codes."""
    parser = build_parser()
    args = parser.parse_args(argv)
    if not getattr(args, "_run", None):
        parser.print_help()
        return int(ExitCode.BAD_INPUT)
    try:
        return int(args._run(args))
    except ForensicsError as err:
        print(f"forensics {args.command}: error: {err}", file=sys.stderr)
        return int(err.code)
    except PermissionError as err:
        print(f"forensics {args.command}: error: permission denied: {err.filename or err}", file=sys.stderr)
        return int(ExitCode.BAD_INPUT)
    except KeyboardInterrupt:
        print(f"forensics {args.command}: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
