"""Typed errors of the ground floor, each carrying what the user can do about it.

Why typed: the CLI maps them to exit code 2 (bad input) with the message and the
help line, and the notebook shows the same text, so no caller parses messages.
"""

from __future__ import annotations


class InputError(Exception):
    """The input cannot be analysed as given: not a bundle or folder, a damaged archive, a bad manifest."""

    def __init__(self, message: str, help: str = "") -> None:
        super().__init__(message)
        self.help = help

    def __str__(self) -> str:
        text = super().__str__()
        return f"{text} ({self.help})" if self.help else text
