"""The header every file our own collectors write as JSON carries: {"format": NAME, "version": N, ...}.

Why one place: each such reader (stack samples, the second look) must refuse another format and a newer
version the same way, before it reads a field, and recognise its file by content the same way.
"""

from __future__ import annotations

from typing import Any

from parsers.input.errors import FileFormatError

#: how far into a file its format name is looked for (it is the first key our writers put)
HEAD_CHARS = 4096


def names_format(text: str, name: str) -> bool:
    """Whether the head of `text` names our format `name` (content sniffing, before decoding)."""
    return f'"{name}"' in text[:HEAD_CHARS]


def check_header(data: Any, name: str, version: int, what: str) -> dict:
    """`data` when it is a JSON object of format `name` at a version up to `version`; FileFormatError else
    (`what` names the kind in the message: 'stack samples', 'second-look')."""
    if not isinstance(data, dict) or data.get("format") != name:
        raise FileFormatError(f"not a {name} file")
    if not isinstance(data.get("version"), int) or data["version"] > version:
        raise FileFormatError(f"{what} version {data.get('version')!r} is newer than this reader ({version})")
    return data
