"""JSON Schemas of every --json output (hang-forensics/<kind>/<version>); see forensics.schemas.load."""

from __future__ import annotations

import json
from importlib import resources
from typing import Any


def load(kind: str) -> dict[str, Any]:
    """The JSON Schema (draft 2020-12) of one output kind, e.g. load('analyze')."""
    text = resources.files(__name__).joinpath(f"{kind}.json").read_text(encoding="utf-8")
    return json.loads(text)
