"""Human-readable verdict for the terminal: the verdict block first, then the merged stacks.

The block a person reads first stays short whatever the job size: suspects that
say the same thing about several ranks share one line ('ranks 0-2,4-7: ...'), and
every line is cut to the terminal's width (the JSON output keeps everything).
"""

from __future__ import annotations

import re

from parsers.stacks.tree import render_tree
from parsers.model import Suspect, Verdict
from parsers.ranges import fold

MAX_EVIDENCE = 6  #: evidence lines of the culprit shown; the rest are counted
MAX_OTHER = 4  #: lines of other suspects shown; the rest are counted


def render_verdict(verdict: Verdict, show_tree: bool = True, width: int | None = None) -> str:
    """The verdict block, the main-thread classes, the stack tree, then missing evidence.

    `width` cuts every line to that many characters ('…' at the end); None or 0 keeps lines whole.
    """
    lines = verdict_block(verdict)
    classes = verdict.sections.get("classes") or []
    if classes:
        lines.append("ranks by what their main thread does:")
        lines += [f"  [{c['ranks']}] {c['activity']}" for c in classes]
    tree_lines = render_tree(verdict.stack_tree) if show_tree and verdict.stack_tree is not None else []
    if tree_lines:
        lines.append("merged main-thread stacks (outermost first, ranks per branch):")
        lines += [f"  {line}" for line in tree_lines]
    if verdict.missing_evidence:
        lines.append("missing evidence:")
        lines += [f"  - {m}" for m in verdict.missing_evidence]
    return "\n".join(cut(line, width) for line in lines)


def verdict_block(verdict: Verdict) -> list[str]:
    """VERDICT line, the hang decision, the culprit with its evidence, which sources agree and what it
    explains, then leads, stragglers, what the evidence shows, and the other suspects folded by what they say."""
    lines = [f"VERDICT: {verdict.summary}"]
    lines.append(f"  hang: {verdict.hang}" + (f" ({verdict.hang_basis})" if verdict.hang_basis else ""))
    culprit = verdict.culprit
    if culprit:
        lines.append(f"  culprit: {culprit.label}  [{culprit.reason_class}, confidence {culprit.confidence:.2f}]")
        lines += [f"    - {e}" for e in culprit.evidence[:MAX_EVIDENCE]]
        if len(culprit.evidence) > MAX_EVIDENCE:
            lines.append(f"    - … {len(culprit.evidence) - MAX_EVIDENCE} more (--json)")
        lines += [f"    - agrees ({a.source or 'another judge'}): {a.reason_class}: {a.reason}" for a in culprit.agreeing[:MAX_OTHER]]
        sources = culprit.sources
        lines.append(f"  sources that agree: {', '.join(sources)}" if len(sources) > 1
                     else f"  one source only: {sources[0] if sources else 'unknown'}")
    if verdict.deadlock is not None:
        lines.append("  deadlock members: " + "; ".join(f"rank {a} waits on rank {b} in {w}" for a, b, w in verdict.deadlock.edges))
    for title, items in (("consequence", verdict.consequences), ("lead", verdict.leads),
                         ("straggler", verdict.stragglers), ("the evidence shows", [x for x in verdict.shows if x not in verdict.summary])):
        lines += [f"  {title}: {item}" for item in items]
    others = fold_suspects(verdict.suspects[1:])
    if others:
        lines.append("other suspects:")
        lines += [f"  {o}" for o in others[:MAX_OTHER]]
        if len(others) > MAX_OTHER:
            lines.append(f"  … {len(others) - MAX_OTHER} more (--json)")
    return lines


def fold_suspects(suspects: list[Suspect]) -> list[str]:
    """One line per distinct claim: suspects whose reason differs only in their own rank share a line."""
    groups: dict[tuple[str, float, str], list[Suspect]] = {}
    for s in suspects:
        claim = _claim(s)
        groups.setdefault((s.reason_class, round(s.confidence, 2), claim), []).append(s)
    out = []
    for (kind, conf, claim), group in groups.items():
        if len(group) == 1:
            s = group[0]
            out.append(f"{s.label} {s.reason}  [{kind}, {conf:.2f}]")
            continue
        ranks = [s.rank for s in group if s.rank is not None]
        out.append(f"ranks {fold(ranks)} ({len(group)}): {claim}  [{kind}, {conf:.2f}]")
    return out


def _claim(s: Suspect) -> str:
    """The reason with the suspect's own 'rank N' taken out, so like claims compare equal."""
    if s.rank is None:
        return s.reason
    return re.sub(rf"^rank {s.rank}\b\s*", "", s.reason)


def cut(line: str, width: int | None) -> str:
    """`line` cut to `width` characters with '…'; whole when width is None or 0."""
    if not width or len(line) <= width:
        return line
    return line[: max(1, width - 1)] + "…"
