"""The one error root of hang-forensics: every expected failure is a kind below `HangForensicsError`.

Why one root with a help text per kind (a class attribute, as pystack's errors.py does): the CLI and the
notebook catch one type, show the message and the kind's help line, and the exit code comes from one
table (forensics/exitcodes.py `code_for`), so no caller parses messages or keeps its own mapping.
It lives here, on the ground floor, because `parsers/` imports nothing from `forensics/`; forensics'
errors (forensics/errors.py) derive from it.

Kinds that callers have long caught as ValueError (or OSError) stay subclasses of it, so an older
`except ValueError` still catches them. Anything that is not a kind below the root is a bug of ours.
"""

from __future__ import annotations


class HangForensicsError(Exception):
    """Root of every expected failure: a message for the user, and the kind's help (what to do)."""

    #: what the user can do about this kind of failure; a raise may give a more precise one
    help: str = "see the message; nothing gathered so far was lost"

    def __init__(self, message: str = "", help: str | None = None) -> None:
        super().__init__(message)
        if help is not None:
            self.help = help


class InputError(HangForensicsError):
    """The input cannot be analysed as given: not a bundle or folder, a damaged archive, a bad manifest."""

    help = "name a bundle folder, its .tar.gz, or a folder of logs and dumps"

    def __str__(self) -> str:
        """The message, and the help a raise gave for this one case (the kind's help is not repeated)."""
        text = super().__str__()
        given = self.__dict__.get("help")
        return f"{text} ({given})" if given else text


class BadInput(HangForensicsError, ValueError):
    """A value given to us (a file's content, a manifest field, an argument) is not what it must be."""

    help = "check the named file or argument; nothing else was changed"


class FileFormatError(BadInput):
    """One file is not in the format its name or content suggested: that file is skipped, the others read."""

    help = "the file is skipped; the other files are still read"


class ManifestError(BadInput):
    """A bundle's manifest.json breaks its schema (docs/bundle-format.md)."""

    help = "the bundle's manifest.json is damaged or from a newer version; its files can still be read loose"


class UsageError(BadInput):
    """An argument or setting (forensics.arm(...), an environment knob, a command option) is out of range."""

    help = "check the argument's value against the command's --help or forensics.arm's docstring"


class UnsafeInput(HangForensicsError):
    """Input refused on purpose because reading it could harm us (a link out of the folder, a hostile pickle)."""

    help = "refused for safety: copy the file somewhere plain and name it directly if you trust it"


class ToolError(HangForensicsError):
    """An outside tool or target failed (gdb, libdw, the NCCL RAS port, a process that went away)."""

    help = "the other collectors' results are kept; see the collector's error in manifest.json"
