"""JSON decoding with its memory bounded by the text's shape, for every JSON file a reader opens.

Why: json.loads turns each `[` or `{` into a Python list or dict of 56-200 bytes, so 31 MB of
nested `[[[[...]]]]` (a mutated Flight Recorder dump the fuzzer made) became 1.4 GB before any
reader saw it. The byte caps of the readers do not bound that; counting the opening brackets does,
in one C pass (brackets inside strings are counted too, which only errs on the safe side).
"""

from __future__ import annotations

import json
from typing import Any

from parsers.input.errors import FileFormatError

#: arrays and objects one JSON text may open; a real Flight Recorder dump of 20,000 entries with
#: their stack frames opens about 1 million, py-spy's dump of 1,000 threads fewer
MAX_CONTAINERS = 2_500_000


def _no_constant(name: str) -> Any:
    raise FileFormatError(f"not a JSON number: {name} (our files never hold NaN or Infinity)")


def loads(text: str | bytes, finite: bool = False) -> Any:
    """`json.loads`, refused (FileFormatError, a ValueError) before decoding when the text opens more
    than MAX_CONTAINERS arrays and objects; with `finite`, a NaN or Infinity (which json.loads takes,
    and which no size or count may be) is refused too."""
    opened = text.count(b"[") + text.count(b"{") if isinstance(text, bytes) else text.count("[") + text.count("{")
    if opened > MAX_CONTAINERS:
        raise FileFormatError(f"not a readable JSON file: it opens {opened:,} arrays and objects "
                              f"(more than {MAX_CONTAINERS:,}: no file of ours or of the tools we read holds that "
                              "many)")
    return json.loads(text, parse_constant=_no_constant) if finite else json.loads(text)
