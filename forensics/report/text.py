"""Human-readable verdict for the terminal: the verdict block first, then the merged stacks.

The block a person reads first stays short whatever the job size: suspects that
say the same thing about several ranks share one line ('ranks 0-2,4-7: ...'), and
every line is cut to the terminal's width (the JSON output keeps everything).
"""

from __future__ import annotations

import re
import textwrap

from forensics.report.advice import CYCLE_ADVICE, advise
from parsers.stacks.tree import render_tree
from parsers.model import Suspect, Verdict
from parsers.ranges import fold

MAX_EVIDENCE = 6  #: evidence lines of the culprit shown; the rest are counted
MAX_OTHER = 4  #: lines of other suspects shown; the rest are counted


def render_verdict(verdict: Verdict, show_tree: bool = True, width: int | None = None,
                   collected: str | None = None) -> str:
    """The verdict block, the main-thread classes, the stack tree, then missing evidence.

    `width` fits lines to a terminal: the VERDICT wraps, other lines are cut with '…' and a
    note says how to see them whole; None or 0 keeps every line whole (files, pipes).
    `collected` (collection_time()) is said under the VERDICT: the moment the ages in it
    are measured from. Every line is escaped (control characters from data shown, not run).
    """
    lines = verdict_block(verdict)
    if collected:
        lines.insert(1, f"  times: measured from {collected}")
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
        lines += [f"  - {m}" for m in fold_missing(verdict.missing_evidence)]
    return "\n".join(fit(lines, width or 0))


_HOST_NOTE = re.compile(r"^host (\S+): (.+)$", re.S)


def fold_missing(notes: list[str]) -> list[str]:
    """'host node001: no host evidence ...' x64 as one line 'hosts node[001-064]: no host evidence ...'
    (the notes of several hosts that say the same thing share a line, as `clush -b` folds output)."""
    out: list[str] = []
    by_note: dict[str, list[str]] = {}
    for note in notes:
        m = _HOST_NOTE.match(note)
        if m is None:
            out.append(note)
            continue
        if m.group(2) not in by_note:
            out.append(m.group(2))  # placeholder: the folded line goes where the first host's note was
        by_note.setdefault(m.group(2), []).append(m.group(1))
    return [f"{host_set(by_note[o])}: {o}" if o in by_note else o for o in out]


def host_set(hosts: list[str]) -> str:
    """'host node1' or 'hosts node[001-064]' (ClusterShell folding of plain host names; any other
    name is listed as it is, after them, and escaped where it is shown)."""
    from forensics.hostset import HostSetError, fold as fold_hosts, validate_host

    plain, other = [], []
    for h in dict.fromkeys(hosts):
        try:
            plain.append(validate_host(h))
        except HostSetError:
            other.append(h)
    names = ([fold_hosts(plain)] if plain else []) + other
    return ("hosts " if len(hosts) > 1 else "host ") + ",".join(names)


def collection_time(evidence) -> str | None:
    """When the evidence was collected, as the evidence states it: the manifest's creation time, else
    the newest recorder copy time, else the newest recorder heartbeat; 'the collection at
    2026-11-29 07:20:11 UTC (the manifest's creation time)', or None when nothing dates it.
    File times are not used: a checkout, an unpacked archive or a plain copy makes them the
    time of the copy, not of the collection."""
    import datetime as dt

    when, source = evidence.collected_unix, "the manifest's creation time"
    if when is None:
        copies = [st.observed_ns for st in evidence.recorder if getattr(st, "observed_is_copy", False) and st.observed_ns]
        if copies:
            when, source = max(copies) / 1e9, "the recorder files' copy time"
    if when is None and evidence.recorder:
        when, source = max(st.heartbeat_ns for st in evidence.recorder) / 1e9, "the newest NCCL recorder heartbeat"
    if when is None:
        return None
    try:
        stamp = dt.datetime.fromtimestamp(when, dt.timezone.utc).strftime("%Y-%m-%d %H:%M:%S UTC")
    except (OverflowError, OSError, ValueError):
        return None
    return f"the collection at {stamp} ({source})"


def verdict_block(verdict: Verdict) -> list[str]:
    """VERDICT line, the hang decision, the culprit with its evidence, which sources agree and what it
    explains, then leads, stragglers, what the evidence shows, and the other suspects folded by what they say."""
    lines = [f"VERDICT: {verdict.summary}"]
    lines.append(f"  hang: {verdict.hang}" + (f" ({verdict.hang_basis})" if verdict.hang_basis else ""))
    lines += [f"  slow: {text}" for text in slowness_lines(verdict)]
    for culprit in verdict.culprits:  # several where the graph has independent sinks (issue 26 item 2.4)
        lines.append(f"  culprit: {culprit.label}  [{culprit.reason_class}, confidence {culprit.confidence:.2f}]")
        advice = advise(culprit)
        lines.append(f"    what it means: {advice.meaning}")
        lines.append(f"    next step: {culprit.action or advice.next_step}")
        lines += [f"    - {cited(e)}" for e in culprit.evidence[:MAX_EVIDENCE]]
        if len(culprit.evidence) > MAX_EVIDENCE:
            lines.append(f"    - … {len(culprit.evidence) - MAX_EVIDENCE} more (--json)")
        lines += [f"    - agrees ({a.source or 'another judge'}): {a.reason_class}: {a.reason}" for a in culprit.agreeing[:MAX_OTHER]]
        sources = culprit.sources
        lines.append(f"  sources that agree: {', '.join(sources)}" if len(sources) > 1
                     else f"  one source only: {sources[0] if sources else 'unknown'}")
    if verdict.deadlock is not None:
        lines.append("  deadlock members: " + "; ".join(f"rank {a} waits on rank {b} in {w}" for a, b, w in verdict.deadlock.edges))
        lines.append(f"    next step: {CYCLE_ADVICE.next_step}")
    # stragglers are the 'slow:' lines above (slowness_lines); verdict.stragglers says the same in the JSON
    for title, items in (("consequence", verdict.consequences), ("lead", verdict.leads),
                         ("the evidence shows", [x for x in verdict.shows if x not in verdict.summary])):
        lines += [f"  {title}: {item}" for item in items]
    others = fold_suspects([s for s in verdict.suspects[1:] if s not in verdict.independent])
    if others:
        lines.append("other suspects:")
        lines += [f"  {o}" for o in others[:MAX_OTHER]]
        if len(others) > MAX_OTHER:
            lines.append(f"  … {len(others) - MAX_OTHER} more (--json)")
    return lines


def cited(e: str) -> str:
    """An evidence line with the tool its typed citation names, where its words do not already end in one."""
    tool = getattr(e, "tool", None)
    return f"{e} [{tool}]" if tool and not str(e).rstrip().endswith("]") else str(e)


def slowness_lines(verdict: Verdict) -> list[str]:
    """What the slowness judges name (a straggler, a slow host, a slow link), one line each. Why its own
    line: a straggler that is not the culprit (a hang not established from time, or a stronger finding
    first) was otherwise only in the JSON sections, and one that is sits at the end of a long summary
    line that the terminal's width cuts."""
    out = []
    for name in ("stragglers", "steps", "links"):
        body = verdict.sections.get(name)
        if not isinstance(body, dict) or not (body.get("late") or body.get("slow")) or not body.get("text"):
            continue
        if name == "steps" and verdict.sections.get("stragglers", {}).get("late"):
            continue  # the collectives' stamps already name the late ranks
        out.append(body["text"] + ("" if body.get("judged", True) else " (shown, not judged: hang or progress not decided)"))
    return out


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


#: C0 controls but tab and newline, DEL, C1 controls, and the bidi/line-separator marks a terminal
#: honours: from data (folder names, manifest hosts, log lines) they could clear the screen or
#: print a fake verdict, so the text outputs show them as escapes
_CONTROL = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u2028\u2029\u202a-\u202e\u2066-\u2069]")


def escape(text: str) -> str:
    """`text` with every control character from data shown as a visible escape (ESC -> '\\x1b').

    The one escape function of the text outputs (analyze, report's VERDICT line, hosts,
    steps): applied at the presentation boundary, line by line, so no data reaches a
    terminal raw. Newlines and tabs are the outputs' own layout and are kept; JSON
    escapes controls itself, HTML escapes through html.escape.
    """
    if not _CONTROL.search(text):
        return text
    return _CONTROL.sub(lambda m: m.group().encode("unicode_escape").decode("ascii"), text)


#: said once under output whose lines were cut to the terminal
CUT_NOTE = "(… = cut to the terminal: --width 0, --json or -o FILE keep lines whole)"


def fit(lines: list[str], width: int, wrap_prefixes: tuple[str, ...] = ("VERDICT:",)) -> list[str]:
    """Escaped lines fitted to `width` (0: unchanged): lines starting with one of `wrap_prefixes`
    wrap (continuation indented), any other long line is cut with '…' and CUT_NOTE is added once."""
    out: list[str] = []
    cut_any = False
    for line in lines:
        line = escape(line)
        if not width or len(line) <= width:
            out.append(line)
        elif line.startswith(wrap_prefixes):
            out += textwrap.wrap(line, width=width, subsequent_indent="    ", break_on_hyphens=False) or [line]
        else:
            out.append(line[: max(1, width - 1)] + "…")
            cut_any = True
    if cut_any:
        out.append(CUT_NOTE if len(CUT_NOTE) <= width else CUT_NOTE[: max(1, width - 1)] + ")")
    return out
