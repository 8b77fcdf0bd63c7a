"""The CLI's own error kind: an expected failure that carries its exit code.

Why here and not a second root: every expected failure derives from parsers.input.errors.HangForensicsError (the
ground floor's root, since parsers/ imports nothing from forensics/); this kind only adds the exit code a
command chose. forensics/exitcodes.py `code_for` turns any kind into its code.
"""

from forensics.exitcodes import ExitCode
from parsers.input.errors import HangForensicsError


class ForensicsError(HangForensicsError):
    """An expected failure with a message for the user (no traceback) and an exit code."""

    help = "see the message; 'forensics <command> --help' lists the command's exit codes"

    def __init__(self, message: str, code: ExitCode = ExitCode.BAD_INPUT, help: str | None = None) -> None:
        super().__init__(message, help)
        self.code = code
