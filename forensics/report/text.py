"""Human-readable verdict for the terminal: the verdict block first, then the merged stacks.

It renders a `ReportView` (forensics.report.view), the one view the JSON, the HTML report
and the notebook render too; the folding helpers (fold_missing, fold_suspects, host_set,
collection_time) live there and are named here for the callers that import them from here.

The block a person reads first stays short whatever the job size: suspects that
say the same thing about several ranks share one line ('ranks 0-2,4-7: ...'), and
every line is cut to the terminal's width (the JSON output keeps everything).
"""

from __future__ import annotations

import textwrap

from forensics.report.view import (ReportView, build_view, collection_time, fold_missing, fold_suspects,  # noqa: F401
                                   host_set)
from forensics.report.words.hostfaults import KERNEL_TIMES_TITLE
from forensics.escape import escape  # the one escape of the text outputs (collect's lines use it too)
from parsers.model import Verdict

MAX_EVIDENCE = 6  #: evidence lines of the culprit shown; the rest are counted
MAX_OTHER = 4  #: lines of other suspects shown; the rest are counted


def render_verdict(verdict: Verdict, show_tree: bool = True, width: int | None = None,
                   collected: str | None = None) -> str:
    """The text of `verdict` (its view built here); `render_view` when a view is at hand."""
    return render_view(build_view(verdict, collected=collected), show_tree=show_tree, width=width)


def render_view(view: ReportView, show_tree: bool = True, width: int | None = None) -> str:
    """The verdict block, the main-thread classes, where each rank's logs stop, the stack tree, then the kernel lines
    the host judge set against the job's start and missing evidence.

    `width` fits lines to a terminal: the VERDICT wraps, other lines are cut with '…' and a
    note says how to see them whole; None or 0 keeps every line whole (files, pipes).
    The view's `times` (collection_time()) is said under the VERDICT: the moment the ages in it
    are measured from. Every line is escaped (control characters from data shown, not run).
    """
    block = view_block(view)
    if view.times:
        block.insert(1, f"  times: measured from {view.times}")
    lines: list[str] = []
    if view.classes:
        lines.append("ranks by what their main thread does:")
        lines += [f"  [{c['ranks']}] {c['activity']}" for c in view.classes]
    if view.logs_stop:
        lines.append(f"where each rank's logs stop ({view.logs_stop_in}):")
        lines += [f"  {x}" for x in view.logs_stop]
    if show_tree and view.stack_lines:
        lines.append("merged main-thread stacks (outermost first, ranks per branch"
                     + (f"; {view.read_only}" if view.read_only else "") + "):")
        lines += [f"  {line}" for line in view.stack_lines]
    missing = ["missing evidence:"] + [f"  - {m}" for m in view.missing] if view.missing else []
    if view.kernel_times:  # host evidence the verdict left out, said beside what is missing
        missing = [f"{KERNEL_TIMES_TITLE}:"] + [f"  - {x}" for x in view.kernel_times] + missing
    # the verdict and what to fetch next are acted on: wrapped whole; the listings between them may be cut
    listed, cut_any = fitted(lines, width or 0)
    note = cut_note(width or 0) if cut_any else []
    return "\n".join(wrap(block, width or 0) + listed + wrap(missing, width or 0) + note)


def verdict_block(verdict: Verdict) -> list[str]:
    """The verdict block of `verdict` (see view_block)."""
    return view_block(build_view(verdict))


def view_block(view: ReportView) -> list[str]:
    """VERDICT line, the hang decision, the culprit with what it means, the next step and its evidence,
    which sources agree, then the deadlock, consequences, leads, stragglers ('slow:'), what the evidence
    shows, and the other suspects folded by what they say: each the view's, one a line."""
    lines = [f"VERDICT: {view.headline}", f"  hang: {view.hang}"]
    lines += [f"  mixed inputs: {x}" for x in view.mixed]
    lines += [f"  host fault: {x}" for x in view.host_lines]
    lines += [f"  slow: {text}" for text in view.stragglers]
    for c in view.culprits:  # several where the graph has independent sinks (issue 26 item 2.4)
        lines.append(f"  culprit: {c.label}  [{c.reason_class}, confidence {c.confidence:.2f}]")
        lines.append(f"    what it means: {c.meaning}")
        lines.append(f"    next step: {c.next_step}")
        lines += [f"    - {e}" for e in c.evidence[:MAX_EVIDENCE]]
        if len(c.evidence) > MAX_EVIDENCE:
            lines.append(f"    - … {len(c.evidence) - MAX_EVIDENCE} more (--json)")
        lines += [f"    - agrees {a}" for a in c.agreeing[:MAX_OTHER]]
        lines.append(f"  {c.sources_line}")
    if view.deadlock:
        lines.append("  deadlock members: " + "; ".join(view.deadlock))
        lines.append(f"    next step: {view.deadlock_next_step}")
    for title, items in (("consequence", view.consequences), ("lead", view.leads), ("the evidence shows", view.shows)):
        lines += [f"  {title}: {item}" for item in items]
    if view.others:
        lines.append("other suspects:")
        lines += [f"  {o}" for o in view.others[:MAX_OTHER]]
        if len(view.others) > MAX_OTHER:
            lines.append(f"  … {len(view.others) - MAX_OTHER} more (--json)")
    return lines


def cut(line: str, width: int | None) -> str:
    """`line` cut to `width` characters with '…'; whole when width is None or 0."""
    if not width or len(line) <= width:
        return line
    return line[: max(1, width - 1)] + "…"




#: said once under output whose lines were cut to the terminal
CUT_NOTE = "(… = cut to the terminal: --width 0, --json or -o FILE keep lines whole)"


def fit(lines: list[str], width: int, wrap_prefixes: tuple[str, ...] = ("VERDICT:",)) -> list[str]:
    """Escaped lines fitted to `width` (0: unchanged): lines starting with one of `wrap_prefixes`
    wrap (continuation indented), any other long line is cut with '…' and CUT_NOTE is added once."""
    out, cut_any = fitted(lines, width, wrap_prefixes)
    return out + (cut_note(width) if cut_any else [])


def fitted(lines: list[str], width: int, wrap_prefixes: tuple[str, ...] = ("VERDICT:",)) -> tuple[list[str], bool]:
    """fit's lines without the note, and whether any was cut."""
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
    return out, cut_any


def cut_note(width: int) -> list[str]:
    """CUT_NOTE wrapped to `width`: the note itself is never cut."""
    return textwrap.wrap(CUT_NOTE, width=max(width, 20), subsequent_indent=" ")


def wrap(lines: list[str], width: int) -> list[str]:
    """Escaped lines wrapped to `width` (0: unchanged), never cut: the verdict block, every line of which a
    person acts on (the next step, the host to drain). A continuation is indented 4 past its line's own indent."""
    out: list[str] = []
    for line in (part for whole in lines for part in whole.split("\n")):  # a line may hold a blank line before it
        line = escape(line)
        if not width or len(line) <= width:
            out.append(line)
            continue
        indent = " " * min(len(line) - len(line.lstrip(" ")) + 4, max(0, width // 3))
        out += textwrap.wrap(line, width=width, subsequent_indent=indent, break_on_hyphens=False,
                             break_long_words=True) or [line]
    return out
