"""Exit codes of every `forensics` command, so scripts can branch on them.

One table for all commands (docs/exit-codes.md states it; a test keeps the two in
step). Codes 0-4 mean the same everywhere; 5 and 6 are command-specific and used
only where the command's --help says so.
"""

from __future__ import annotations

from enum import IntEnum

from parsers.input.errors import HangForensicsError


class ExitCode(IntEnum):
    """Process exit status of a `forensics` command."""

    OK = 0  #: done; where the command judges (analyze, report, demo): a culprit was named
    FAILURE = 1  #: an unexpected internal error (a bug: please report it)
    BAD_INPUT = 2  #: bad arguments or input: unknown PID, not a bundle, corrupt manifest, no ranks
    PARTIAL = 3  #: done, but some evidence is missing (a collector failed, a host answered late)
    INCONCLUSIVE = 4  #: done, and nothing to blame: no culprit could be named
    BAD_HOSTS = 5  #: hosts, bisect only: hosts to act on were found (listed in the output)
    NO_HOST = 6  #: collect --hosts/--slurm-job only: no host answered, nothing was collected
    PIPE_CLOSED = 141  #: stdout was closed early (e.g. `| head`): output cut short, as SIGPIPE would


#: what each shared code means, for --help and docs/exit-codes.md
SHARED = {
    ExitCode.OK: "done (where the command names a culprit: one was named)",
    ExitCode.FAILURE: "internal error (a bug)",
    ExitCode.BAD_INPUT: "bad arguments or input (not a bundle, unknown PID, corrupt manifest, no ranks)",
    ExitCode.PARTIAL: "done, but evidence is partial (see the output / manifest.json)",
    ExitCode.INCONCLUSIVE: "done, nothing to blame (no culprit named)",
}


def help_epilog(name: str, codes: dict[int, str]) -> str:
    """The 'exit codes' section of one command's --help, from its own table."""
    lines = [f"exit codes of 'forensics {name}' (all commands: docs/exit-codes.md):"]
    for code in sorted(codes):
        lines.append(f"  {code:<3} {codes[code]}")
    lines.append(f"  {int(ExitCode.PIPE_CLOSED):<3} stdout closed before the output was written (e.g. '| head')")
    return "\n".join(lines) + "\n"


def code_for(err: HangForensicsError) -> ExitCode:
    """The exit code of an expected failure that reached the command's top: the one place that maps
    error kinds (parsers/input/errors.py) to codes. A ForensicsError carries the code its command chose; any
    other kind is the input's or the arguments' fault (a tool's failure is recorded by its collector,
    not raised this far), so BAD_INPUT. Anything outside the root is a bug: FAILURE, with a traceback."""
    code = getattr(err, "code", None)
    return ExitCode(code) if isinstance(code, int) else ExitCode.BAD_INPUT
