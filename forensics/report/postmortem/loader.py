"""`load(path)`: a bundle folder, a loose folder of logs and dumps, or an archive of either, analysed.

The analysis is parsers.pipeline.analyze's one pipeline, worded (forensics.report.words); this module only
wraps the result for notebooks and turns bad input into a ForensicsError with what to do.
"""

from __future__ import annotations

from pathlib import Path

from forensics.errors import ForensicsError
from forensics.report.postmortem.session import PostMortem
from forensics.report.words import analyze
from parsers.input.errors import InputError
from parsers.gather.source import manifest_refusal


def load(path: str | Path | list) -> PostMortem:
    """Load and analyse a bundle, folder, archive (tar, zip), a log (.gz too), '-' (stdin), or a list of
    these (a bundle plus extra logs); raises ForensicsError on bad input."""
    if isinstance(path, (list, tuple)):
        paths = [p if str(p) == "-" else Path(p).expanduser() for p in path]
        path = paths[0] if len(paths) == 1 else paths
    elif str(path) != "-":
        path = Path(path).expanduser()
    try:
        result = analyze(path)
    except InputError as err:
        raise ForensicsError(str(err)) from err
    except ValueError as err:  # a user's knowledge-base file ($FORENSICS_KB) is broken
        raise ForensicsError(f"knowledge base: {err}") from err
    if not result.evidence.artifacts and result.evidence.manifest is None:
        refused = manifest_refusal(result.evidence.skipped)
        if refused is not None:
            raise ForensicsError(f"{path if not isinstance(path, list) else ' '.join(map(str, path))}: {refused}, "
                                 "and no other file in it that this tool reads")
        raise ForensicsError(f"{path if not isinstance(path, list) else ' '.join(map(str, path))}: "
                             "not a bundle, and no logs or dumps in it")
    verdict = result.verdict
    shown = " ".join(str(p) for p in path) if isinstance(path, list) else str(path)
    return PostMortem(verdict, source=shown, evidence=result.evidence, logs=result.logs)


#: the same call, by its older name
from_bundle = load
