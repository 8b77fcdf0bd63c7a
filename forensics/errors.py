"""The one exception type the CLI turns into a clear message and an exit code."""

from forensics.exitcodes import ExitCode


class ForensicsError(Exception):
    """An expected failure with a message for the user (no traceback) and an exit code."""

    def __init__(self, message: str, code: ExitCode = ExitCode.BAD_INPUT) -> None:
        super().__init__(message)
        self.code = code
