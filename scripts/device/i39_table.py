#!/usr/bin/env python3
"""Issue 39's table: each captured case's truth beside its live and logs-only verdicts and torch's fr_trace.

Why: the issue's "Show it" asks for one table (case, live verdict, logs-only verdict, torch's analyzer), and
the project was burnt by reading only its own captures: each row says whether the culprit named is one of the
case's true culprit ranks (truth.json, drawn from a seed by i39_scenarios.py), live and post-mortem.

    python scripts/device/i39_table.py /work/captures/i39/I39-*/      # folders unpacked from I39-<case>.tar.gz
    python scripts/device/i39_table.py --json table.json /work/captures/i39/I39-*/
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from forensics.report.words import analyze  # noqa: E402


def verdict_row(path: Path) -> dict:
    """The culprit rank(s) and the summary of `analyze` on one input; what it lacks (evidence gaps)."""
    if not path.exists():
        return {"summary": f"(no {path.name})", "culprits": [], "gaps": []}
    try:
        v = analyze(path).verdict
    except Exception as err:  # noqa: BLE001 - one unreadable capture must not hide the others
        return {"summary": f"(analyze failed: {type(err).__name__}: {err})", "culprits": [], "gaps": []}
    culprits = sorted({c.rank for c in v.culprits if c.rank is not None})
    members = sorted(v.deadlock.members) if v.deadlock is not None else []
    return {"summary": v.summary, "culprits": culprits or members, "deadlock": members,
            "class": str(v.culprit.reason_class) if v.culprit is not None else None,
            "gaps": [g["kind"] for g in v.sections.get("evidence_gaps") or []]}


def fr_trace_line(case_dir: Path) -> str:
    """The first lines of torch's analyzer that say something (not its header or a warning)."""
    f = case_dir / "fr_trace.txt"
    if not f.is_file():
        return "(not run)"
    lines = [ln.strip() for ln in f.read_text(errors="replace").splitlines()
             if ln.strip() and not ln.startswith("#") and "tabulate" not in ln and not ln.startswith("---")]
    return " | ".join(lines[:3])[:300] or "(no output)"


def row(case_dir: Path) -> dict:
    truth = json.loads((case_dir / "truth.json").read_text())
    live, logs = verdict_row(case_dir / "bundle"), verdict_row(case_dir / "logs")
    want = set(truth["culprit_ranks"])
    return {"case": truth["case"], "world": truth["world_size"], "truth": sorted(want),
            "fault_class": truth["fault_class"], "expected_why": truth["expected_why"],
            "live": live, "logs": logs, "live_right": bool(live["culprits"]) and set(live["culprits"]) <= want,
            "logs_right": bool(logs["culprits"]) and set(logs["culprits"]) <= want, "fr_trace": fr_trace_line(case_dir)}


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("cases", nargs="+", type=Path, help="case folders (each with truth.json, bundle/, logs/)")
    p.add_argument("--json", type=Path)
    args = p.parse_args()
    rows = [row(d) for d in args.cases if (d / "truth.json").is_file()]
    for r in rows:
        print(f"== {r['case']} ({r['world']} ranks): truth {r['truth']} {r['fault_class']}: {r['expected_why']}")
        for side in ("live", "logs"):
            v = r[side]
            mark = "right" if r[f"{side}_right"] else "NOT the truth" if v["culprits"] else "no culprit"
            gaps = f" [gaps: {', '.join(v['gaps'])}]" if v["gaps"] else ""
            print(f"   {side:4s} {mark:13s} {v['culprits']} {v['summary'][:220]}{gaps}")
        print(f"   fr_trace {r['fr_trace']}")
    if args.json:
        args.json.write_text(json.dumps(rows, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
