#!/usr/bin/env python3
"""Write docs/realworld.md: every real excerpt, what was recognised, the verdict, right or honest.

    PYTHONPATH=. .venv/bin/python scripts/realworld_table.py > docs/realworld.md

The rows come from tests/support/verdicts.py, the same code the tests run.
"""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

# the tests' helper modules (tests/support once scripts/mirror_tests.py has run) import each other by name
sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests" / "support"))

from verdicts import BEYOND_EXCERPT, CORPUS, GAPS, judge, stems  # noqa: E402



def main() -> int:
    rows = [judge(s) for s in stems()]
    out = sys.stdout
    known = [r for r in rows if r.known]
    print("# Real-world excerpts: what `forensics analyze` makes of them", file=out)
    print(file=out)
    print(f"{len(rows)} excerpts that users posted in public issue threads, each alone in a folder "
          "(`tests/fixtures/realworld/`, one `.json` per excerpt with its source, versions and what the "
          "thread establishes). Records: the NCCL/PyTorch/launcher/host records a correct reader must yield "
          "from the excerpt, and how many were. Outcome: *right* (the thread's culprit or host cause reached), "
          "*honest* (the thread does not know, or knows from what the excerpt lacks, said why; no culprit named "
          "and the summary says what the lines show), *gap* (a known miss, with why). "
          "Regenerate with `scripts/realworld_table.py`; `tests/parsers/pipeline/test_verdicts.py` checks every row.",
          file=out)
    print(file=out)
    rec = sum(r.recognised for r in rows), sum(r.records for r in rows)
    print(f"Totals: records {rec[0]} of {rec[1]}; threads that know the truth {len(known)}, of them right "
          f"{sum(r.outcome == 'right' for r in known)}, honest where the excerpt cannot reach the thread's truth "
          f"{sum(r.outcome == 'honest' for r in known)}; the others honest "
          f"{sum(r.outcome == 'honest' for r in rows if not r.known)} of {len(rows) - len(known)}, "
          f"overclaims {sum(r.outcome == 'overclaim' for r in rows)}.", file=out)
    print(file=out)
    print(_versions(), file=out)
    print(file=out)
    print("| excerpt | source | records | verdict | outcome |", file=out)
    print("| --- | --- | --- | --- | --- |", file=out)
    for r in rows:
        summary = r.summary.replace("|", "/")
        summary = summary if len(summary) <= 160 else summary[:157] + "..."
        why = (f" ({GAPS[r.stem]})" if r.stem in GAPS
               else f" ({BEYOND_EXCERPT[r.stem][0]})" if r.stem in BEYOND_EXCERPT else "")
        print(f"| {r.stem} | {r.url} | {r.recognised}/{r.records} | {summary} | {r.outcome}{why} |", file=out)
    return 0


def _key(version: str) -> tuple[int, ...]:
    """'2.18.5+cuda12.2' -> (2, 18, 5): numeric parts only, so ranges sort by release."""
    head = re.split(r"[^\d.]", version, maxsplit=1)[0]
    return tuple(int(p) for p in head.split(".") if p.isdigit())


def _series(version: str) -> str:
    """'2.14.3+cuda11.7' -> '2.14': the release series a format belongs to."""
    return ".".join(str(p) for p in _key(version)[:2])


#: the series issue 13 asks the corpus to cover (PyTorch 1.8 to 2.9, NCCL 2.7 to 2.28)
_WANTED = {"torch_version": [f"1.{m}" for m in range(8, 14)] + [f"2.{m}" for m in range(10)],
           "nccl_version": [f"2.{m}" for m in range(7, 29)]}


def _versions() -> str:
    """The NCCL and PyTorch series the excerpts or their threads state (the .json fields, how each was
    established in `versions_from`), the wanted series none states, and the format markers of the newest
    PyTorch code, which the lines carry whether or not a version is stated."""
    stated: dict[str, list[str]] = {"nccl_version": [], "torch_version": []}
    watchdog_class = []
    for stem in stems():
        meta = json.loads((CORPUS / f"{stem}.json").read_text(encoding="utf-8"))
        for field, seen in stated.items():
            if meta.get(field):
                seen.append(meta[field])
        if "ProcessGroupNCCL::Watchdog::" in (CORPUS / f"{stem}.log").read_text(encoding="utf-8", errors="replace"):
            watchdog_class.append(stem)
    parts = []
    for field, name in (("nccl_version", "NCCL"), ("torch_version", "PyTorch")):
        counts: dict[str, int] = {}
        for v in sorted(stated[field], key=_key):
            counts[_series(v)] = counts.get(_series(v), 0) + 1
        listed = ", ".join(f"{s} ({n})" for s, n in counts.items())
        missing = [s for s in _WANTED[field] if s not in counts]
        parts.append(f"{name} {listed or 'none'}; {len(stated[field])} excerpts state one"
                     + (f"; no excerpt states {', '.join(missing)}" if missing else ""))
    return ("Versions stated in the excerpts or their threads, by series (excerpts): " + ". ".join(parts) + ". "
            "Formats by era are wider than the stated versions: PyTorch 1.x `[Rank N]` lines without a PG tag, "
            "2.2+ `[PG ..]` tags, 2.3+ `[rankN]:` prefixes; "
            f"{len(watchdog_class)} excerpt{'' if len(watchdog_class) == 1 else 's'} "
            f"({', '.join(watchdog_class) or 'none'}) carr{'ies' if len(watchdog_class) == 1 else 'y'} "
            f"frames of c10d's "
            "`ProcessGroupNCCL::Watchdog` class (newer than the `ncclCommWatchdog`/`watchdogHandler` frames).")


if __name__ == "__main__":
    raise SystemExit(main())
