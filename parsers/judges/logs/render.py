"""Plain-text rendering of a LogAnalysis, for `forensics analyze` and humans reading a terminal.

Why here: the correlation knows what its sections mean; the CLI should not have to.
"""

from __future__ import annotations

from parsers.judges.logs import LogAnalysis


def render_text(analysis: LogAnalysis, max_suspects: int = 5, max_rows: int = 8) -> str:
    """Culprit first, then other suspects, the missing-line table, mismatches and the graph summary."""
    out: list[str] = []
    if not analysis.suspects:
        out.append("No culprit named: the evidence shows no rank breaking the pattern.")
    for i, s in enumerate(analysis.suspects[:max_suspects]):
        head = "CULPRIT" if i == 0 else "suspect"
        out.append(f"{head}: {s.label}  [{s.reason_class}, confidence {s.confidence:.2f}]")
        out.append(f"    {s.reason}")
        for e in s.evidence[:4]:
            out.append(f"    - {e}")
    sec = analysis.sections
    rows = sec.get("missing_lines") or []
    if rows:
        out.append("")
        out.append("missing lines (per communicator and position: who logged it, who did not):")
        for r in rows[:max_rows]:
            out.append(f"    {r['comm']} #{r['seq']}: logged by {r['n_logged']} [{r['logged']}], "
                       f"missing {r['n_missing']} [{r['missing']}]")
    for m in (sec.get("mismatches") or [])[:max_rows]:
        out.append(f"mismatch {m['comm']} #{m['seq']}: ranks {m['ranks']} called {m['called']}; "
                   f"{m['n_majority']} called {m['majority_called']}")
    g = sec.get("graph") or {}
    if g:
        out.append(f"wait-for graph: {g.get('nodes', 0)} ranks, {g.get('edges', 0)} edges, roots {g.get('roots')}"
                   + (f", cycles {g.get('cycles')}" if g.get("cycles") else ""))
    files = sec.get("files") or {}
    unknown = sum((sec.get("unknown_lines") or {}).values())
    out.append(f"read {files.get('read', 0)} file(s) {files.get('by_kind', {})}; {unknown} unrecognised line(s); "
               f"{len(files.get('skipped', []))} skipped; {len(files.get('problems', []))} with problems")
    return "\n".join(out) + "\n"
