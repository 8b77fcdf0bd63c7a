"""Exit codes shared by every `forensics` command, so scripts can branch on them.

They are documented in docs/commands/*.md; keep the two in step.
"""

from enum import IntEnum


class ExitCode(IntEnum):
    """Process exit status of a `forensics` command."""

    OK = 0  #: the command did everything it was asked; analyze: a culprit was named
    FAILURE = 1  #: an unexpected internal error (a bug: please report it)
    BAD_INPUT = 2  #: bad arguments or input: unknown PID, not a bundle, corrupt manifest, no ranks
    PARTIAL = 3  #: the bundle was written but some evidence is missing (see its manifest)
    INCONCLUSIVE = 4  #: analysis ran but could not name a culprit
