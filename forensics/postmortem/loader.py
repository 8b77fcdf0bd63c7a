"""`load(path)`: a bundle folder, a loose folder of logs and dumps, or an archive of either, analysed.

The analysis is parsers.analyze's one pipeline; this module only wraps the result
for notebooks and turns bad input into a ForensicsError with what to do.
"""

from __future__ import annotations

from pathlib import Path

from forensics.errors import ForensicsError
from forensics.postmortem.session import PostMortem
from forensics.postmortem.waitfor import correlated_graph
from parsers.analyze import analyze
from parsers.errors import InputError


def load(path: str | Path) -> PostMortem:
    """Load and analyse a bundle, folder or archive; raises ForensicsError on bad input."""
    path = Path(path).expanduser()
    try:
        result = analyze(path)
    except InputError as err:
        raise ForensicsError(str(err)) from err
    except ValueError as err:  # a user's knowledge-base file ($FORENSICS_KB) is broken
        raise ForensicsError(f"knowledge base: {err}") from err
    if not result.evidence.artifacts and result.evidence.manifest is None:
        raise ForensicsError(f"{path}: not a bundle, and no logs or dumps in it")
    verdict = result.verdict
    return PostMortem(verdict, source=str(path), evidence=result.evidence, graph=correlated_graph(verdict))


#: the same call, by its older name
from_bundle = load
