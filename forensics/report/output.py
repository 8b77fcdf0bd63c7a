"""Where a command's output goes, and the envelope of every --json output.

Every JSON document a command prints starts with "schema": "hang-forensics/<kind>/<version>";
the JSON Schema of each kind ships in forensics/schemas/<kind>.json, so a script can
check what it reads. JSON is compact unless --pretty is given: it is for programs.
"""

from __future__ import annotations

import argparse
import errno
import json
import os
import shutil
import sys
from pathlib import Path
from typing import Any

from forensics import safefs
from forensics.errors import ForensicsError
from forensics.report.text import escape, fit  # noqa: F401 - the one escape of every text output

SCHEMA_VERSION = 1
KINDS = ("analyze", "collect", "demo", "env", "hosts", "bisect", "bisect-simulation", "steps", "ras",
         "nccl-plugin-read")


def schema_id(kind: str) -> str:
    """'hang-forensics/analyze/1'."""
    if kind not in KINDS:
        raise ValueError(f"unknown JSON kind {kind!r}")
    return f"hang-forensics/{kind}/{SCHEMA_VERSION}"


def envelope(kind: str, data: dict[str, Any]) -> dict[str, Any]:
    """`data` with its schema id first."""
    return {"schema": schema_id(kind), **{k: v for k, v in data.items() if k != "schema"}}


def json_text(kind: str, data: dict[str, Any], pretty: bool = False) -> str:
    """The JSON document of one output: compact by default, indented with pretty=True."""
    doc = envelope(kind, data)
    if pretty:
        text = json.dumps(doc, indent=1, default=str, ensure_ascii=False)
    else:
        text = json.dumps(doc, separators=(",", ":"), default=str, ensure_ascii=False)
    # a lone surrogate from data (a name read with surrogateescape) cannot be written as UTF-8: it becomes its
    # JSON escape (\udcff), still valid JSON (found by benchmarks/fuzz_structured.py in a proc.json string)
    return text.encode("utf-8", "backslashreplace").decode("utf-8")


def text_width(width: int | None, output: Path | None = None) -> int:
    """The width human lines are fitted to: `width` when given (0: whole lines), else the
    terminal's width when stdout is a terminal and no -o FILE is given, else 0.

    Why 0 off a terminal: a file, a pipe, `tee`, `grep` or a Slurm job's output has no width,
    and a cut VERDICT line loses the culprit's reason (the 80-column fallback did that)."""
    if width is not None:
        return max(0, width)
    if output is not None and str(output) != "-":
        return 0
    try:
        if not sys.stdout.isatty():
            return 0
    except (AttributeError, ValueError):
        return 0
    return shutil.get_terminal_size().columns


def add_output_options(parser: argparse.ArgumentParser, json_help: str | None = None) -> None:
    """-o/--output FILE, and --json/--pretty when the command has a JSON form."""
    parser.add_argument("-o", "--output", type=Path, metavar="FILE", help="write the output to FILE instead of stdout")
    if json_help:
        parser.add_argument("--json", action="store_true", help=json_help)
        parser.add_argument("--pretty", action="store_true", help="with --json: indent the JSON (default compact)")


def emit(text: str, output: Path | None = None) -> None:
    """Print human `text` (one trailing newline) on stdout, or write it to `output`, every control character
    from data escaped (`escape`): the one boundary of every text output, so no command's lines reach a
    terminal raw, whichever data they quote."""
    emit_document(escape(text), output)


def emit_document(text: str, output: Path | None = None) -> None:
    """`text` as it is, on stdout or into `output`: a JSON document (json_text), whose strings json.dumps wrote
    with their C0 controls escaped; `escape` would make its C1 escapes ('\\x85') invalid JSON."""
    if not text.endswith("\n"):
        text += "\n"
    if output is None or str(output) == "-":
        sys.stdout.write(text)
        return
    try:
        safefs.ensure_folder(output.parent)  # as root: no folder on the way another user could swap
        # a new temp file renamed over the name: a planted link is replaced, never followed
        safefs.replace_file(output, text)
    except OSError as err:  # a full disk: replace_file removed its temp file, the old file (if any) is as it was
        raise ForensicsError(f"{output}: cannot write ({err.strerror or err}); nothing was written") from err


def emit_json(kind: str, data: dict[str, Any], args: argparse.Namespace) -> None:
    """The JSON form of an output, where -o/--output and --pretty say."""
    emit_document(json_text(kind, data, getattr(args, "pretty", False)), getattr(args, "output", None))


class to_output:
    """`with to_output(path):` everything printed to stdout inside goes to `path` instead
    (written to a temporary name and renamed at the end, so a reader never sees half a file).
    With path None or '-', stdout stays stdout."""

    def __init__(self, path: Path | None) -> None:
        self.path = None if path is None or str(path) == "-" else Path(path)

    def __enter__(self) -> None:
        if self.path is None:
            return
        self._saved = sys.stdout
        tmp = self.path.with_name(f".{self.path.name}.{os.getpid()}.tmp")
        try:
            safefs.ensure_folder(self.path.parent)
            # created new (O_EXCL|O_NOFOLLOW), renamed over the name at the end: a planted link is never followed
            self._file = os.fdopen(safefs.create(tmp), "w", encoding="utf-8")  # noqa: SIM115 - closed in __exit__
        except OSError as err:
            raise ForensicsError(f"{self.path}: cannot write ({err.strerror or err})") from err
        self._tmp = tmp
        sys.stdout = self._file

    def __exit__(self, exc_type, exc, tb) -> None:
        """Rename the finished temp file over the name; on any failure (a full disk at the last flush, the
        command's own error, a signal) remove it: no partial file and no temp file stays."""
        if self.path is None:
            return
        sys.stdout = self._saved
        try:
            self._file.close()
            if exc_type is None:
                self._tmp.replace(self.path)
                return
        except OSError as err:
            self._tmp.unlink(missing_ok=True)
            raise ForensicsError(f"{self.path}: cannot write ({err.strerror or err}); nothing was written") from err
        self._tmp.unlink(missing_ok=True)
        if isinstance(exc, OSError) and exc.errno in (errno.ENOSPC, errno.EDQUOT, errno.EFBIG):
            raise ForensicsError(f"{self.path}: cannot write ({exc.strerror or exc}); nothing was written") from exc
