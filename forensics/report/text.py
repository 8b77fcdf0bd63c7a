"""Human-readable verdict for the terminal."""

from __future__ import annotations

from parsers.model import Verdict


def render_verdict(verdict: Verdict, show_tree: bool = True) -> str:
    lines = []
    culprit = verdict.culprit
    if culprit:
        lines.append(f"VERDICT: {verdict.summary}")
        lines.append(f"  culprit: {culprit.label}  [{culprit.reason_class}, confidence {culprit.confidence:.2f}]")
        lines += [f"    - {e}" for e in culprit.evidence]
    else:
        lines.append(f"VERDICT: {verdict.summary}")
    if len(verdict.suspects) > 1:
        lines.append("other suspects:")
        for s in verdict.suspects[1:]:
            lines.append(f"  {s.label} {s.reason}  [{s.reason_class}, {s.confidence:.2f}]")
    classes = verdict.sections.get("classes") or []
    if classes:
        lines.append("ranks by what their main thread does:")
        lines += [f"  [{c['ranks']}] {c['activity']}" for c in classes]
    if show_tree and verdict.sections.get("stack_tree_text"):
        lines.append("merged main-thread stacks (outermost first, ranks per branch):")
        lines += [f"  {line}" for line in verdict.sections["stack_tree_text"]]
    if verdict.missing_evidence:
        lines.append("missing evidence:")
        lines += [f"  - {m}" for m in verdict.missing_evidence]
    return "\n".join(lines)
