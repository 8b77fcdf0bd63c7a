"""The HTML report: one self-contained file with the verdict, the pictures and the tables.

No script, no stylesheet link, no font or image fetched: pictures are inline SVG,
the style is inline CSS, so the file opens the same offline, in a ticket or a
mail. Every string from the bundle is escaped: a bundle is untrusted input, and a
frame or host name must not become markup.
"""

from __future__ import annotations

import datetime as dt
import html
from pathlib import Path
from typing import Any, Sequence

from forensics import __version__, safefs
from forensics.report.graph import MAX_RANK_NODES, draw_waitfor
from forensics.report.stacktree import draw_stack_tree
from forensics.report.style import to_svg
from forensics.report.timeline import MAX_LANES, draw_timeline
from forensics.report.view import ReportView, build_view
from forensics.report.words.hostfaults import KERNEL_TIMES_TITLE
from parsers.model import Verdict
from parsers.model.ranges import fold

BIG_JOB = 64  #: past this many ranks, tables list suspects first

CSS = """
body{font-family:system-ui,-apple-system,'Segoe UI',sans-serif;margin:24px auto;max-width:1250px;color:#222;
padding:0 16px}
h1{font-size:22px;margin-bottom:4px} h2{font-size:17px;border-bottom:1px solid #ddd;padding-bottom:4px;margin-top:32px}
.verdict{border-left:6px solid #d62728;background:#fdf1f1;padding:12px 16px;margin:12px 0}
.verdict.none{border-color:#999;background:#f4f4f4}
.verdict .summary{font-size:16px;font-weight:600}
.culprit{color:#d62728;font-weight:700}
table{border-collapse:collapse;font-size:13px;margin:8px 0}
th,td{border:1px solid #ddd;padding:3px 8px;text-align:left;vertical-align:top}
th{background:#f3f3f3} tr.culprit td{background:#fde0e0} tr.suspect td{background:#fff0f0}
.figure{overflow-x:auto;margin:8px 0} .figure svg{max-width:100%;height:auto}
pre{background:#f7f7f7;padding:8px;overflow-x:auto;font-size:12px}
.meta{color:#666;font-size:12px}
"""


def esc(value: Any) -> str:
    """HTML-escaped text of any value; None is an empty cell."""
    if value is None:
        return ""
    if isinstance(value, float):
        return "" if value != value else f"{value:.2f}"  # NaN is an empty cell
    if isinstance(value, (list, tuple)):
        return html.escape("; ".join(str(v) for v in value))
    return html.escape(str(value))


def _as_view(what: Any) -> ReportView:
    """A ReportView from a view, a Verdict, or anything that holds a `view` (a notebook PostMortem)."""
    if isinstance(what, ReportView):
        return what
    if isinstance(what, Verdict):
        return build_view(what)
    view = getattr(what, "view", None)
    if isinstance(view, ReportView):
        return view
    raise TypeError(f"not a report view: {type(what).__name__}")


def verdict_html(what: ReportView | Verdict) -> str:
    """Summary, culprit with its plain words, next step and evidence, the lines under it, other suspects,
    missing evidence: the same lines as the text output, from the same view."""
    v = _as_view(what)
    c = v.culprit
    # inline styles as well as classes: notebooks show this block without the report's stylesheet
    box = "border-left:6px solid #d62728;background:#fdf1f1" if c else "border-left:6px solid #999;background:#f4f4f4"
    parts = [f'<div class="verdict{"" if c else " none"}" id="verdict" style="{box};padding:12px 16px;margin:12px 0">',
             f'<div class="summary" style="font-size:16px;font-weight:600">VERDICT: {esc(v.headline)}</div>']
    if v.times:
        parts.append(f'<p class="meta">times: measured from {esc(v.times)}</p>')
    if v.mixed:  # files of another job: said before anything that may rest on them
        parts.append('<ul class="mixed-inputs" id="mixed-inputs" style="font-weight:600">' + "".join(
            f"<li>mixed inputs: {esc(x)}</li>" for x in v.mixed) + "</ul>")
    if v.host_faults:  # where they explain, the hosts to take out of the job lead (forensics.report.words.hostfaults)
        items = "".join(f'<li class="host-fault {esc(f.status)}">host fault: {esc(f.said())}</li>'
                        for f in v.host_faults)
        parts.append('<ul class="host-faults" id="host-faults" style="font-weight:600">' + items + "</ul>")
    if c:
        parts.append(f'<p>culprit: <span class="culprit" id="culprit" '
                     f'style="color:#d62728;font-weight:700">{esc(c.label)}</span> '
                     f'[{esc(c.reason_class)}, confidence {c.confidence:.2f}]</p>')
        parts.append(f'<p id="meaning">what it means: {esc(c.meaning)}</p><p id="next-step"><b>next step:</b> '
                     f'{esc(c.next_step)}</p>')
        if c.evidence:
            parts.append("<ul>" + "".join(f"<li>{esc(e)}</li>" for e in c.evidence) + "</ul>")
        parts.append(f'<p class="sources">{esc(c.sources_line)}</p>')
    lines = [("hang", v.hang)] + [("deadlock", x) for x in v.deadlock]
    if v.deadlock_next_step:
        lines.append(("next step", v.deadlock_next_step))
    lines += [("consequence", x) for x in v.consequences] + [("lead", x) for x in v.leads]
    lines += [("straggler", x) for x in v.stragglers] + [("the evidence shows", x) for x in v.shows]
    parts.append('<ul class="lines" id="verdict-lines">' + "".join(
        f'<li class="{esc(k.replace(" ", "-"))}">{esc(k)}: {esc(x)}</li>' for k, x in lines) + "</ul>")
    if v.others:
        parts.append("<p>other suspects:</p><ul>" + "".join(f"<li>{esc(o)}</li>" for o in v.others) + "</ul>")
    parts.append("</div>")
    if v.missing:
        parts.append("<p><b>missing evidence:</b></p><ul>" + "".join(f"<li>{esc(m)}</li>" for m in v.missing) + "</ul>")
    return "\n".join(parts)


def table_html(rows: Sequence[dict[str, Any]], columns: Sequence[str] | None = None, table_id: str = "",
               max_rows: int = 500) -> str:
    """A plain HTML table; rows with culprit/suspect set are highlighted. Long tables are cut with a note."""
    if not rows:
        return "<p><i>none</i></p>"
    columns = list(columns or rows[0].keys())
    head = "".join(f"<th>{esc(c)}</th>" for c in columns)
    body = []
    for row in rows[:max_rows]:
        cls = "culprit" if row.get("culprit") else "suspect" if row.get("suspect") else ""
        cells = "".join(f"<td>{esc(row.get(c))}</td>" for c in columns)
        body.append(f'<tr class="{cls}">{cells}</tr>')
    more = f'<p class="meta">{len(rows) - max_rows} more rows not shown</p>' if len(rows) > max_rows else ""
    ident = f' id="{esc(table_id)}"' if table_id else ""
    return f"<table{ident}><thead><tr>{head}</tr></thead><tbody>{''.join(body)}</tbody></table>{more}"


def suspects_first(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Culprit, then other suspects, then everyone else; by rank within each."""
    return sorted(rows, key=lambda r: (not r.get("culprit"), not r.get("suspect"), r.get("rank") is None,
                                       r.get("rank") or 0))


def figure_html(svg: str, figure_id: str, caption: str) -> str:
    return f'<div class="figure" id="{figure_id}" role="img" aria-label="{esc(caption)}">{svg}</div>'


def build_report(what: Any) -> str:
    """The whole report as one HTML string, from a ReportView (or a Verdict, or a notebook PostMortem)."""
    v = _as_view(what)
    graph_svg = to_svg(draw_waitfor(v.graph, MAX_RANK_NODES))
    suspects = {s.rank for s in v.suspects if s.rank is not None}
    tree_svg = to_svg(draw_stack_tree(v.merged_stack_tree, suspects, v.culprit.rank if v.culprit else None,
                                      note=v.no_stack_note()))
    timeline_svg = to_svg(draw_timeline(v.timeline, MAX_LANES, axis=v.timeline_axis))
    ranks = list(v.rank_rows)
    timeline = [e.to_dict() for e in v.timeline]
    note = ""
    if len(ranks) > BIG_JOB:  # the suspects would drown: put them on top
        ranks = suspects_first(ranks)
        timeline = suspects_first(timeline)
        note = f'<p class="meta">{len(ranks)} ranks: suspects first, then by rank.</p>'
    stacks = (["<h2>Merged stacks</h2>", figure_html(tree_svg, "stack-tree", "merged stack tree with rank counts")]
              if v.merged_stack_tree.get("ranks") else
              ["<h2>Merged stacks</h2>", '<p class="meta">no stack in this input (logs only): the chart and the '
               'tables above say where each rank\'s logs stop.</p>'])
    sections = [
        "<h2>Wait-for graph</h2>", figure_html(graph_svg, "waitfor-graph", "wait-for graph, culprit in red"),
        "<h2>Last operation reached</h2>", figure_html(timeline_svg, "timeline", "last operation reached per rank"),
        (f'<p class="meta" id="logs-stop">where each rank\'s logs stop ({esc(v.logs_stop_in)}): '
         + "; ".join(esc(x) for x in v.logs_stop) + "</p>") if v.logs_stop else "",
        *stacks,
        "<h2>Ranks</h2>", note, f'<p class="meta">{esc(v.read_only)}.</p>' if v.read_only else "",
        table_html(ranks, ["rank", "host", "pid", "state", "activity", "op", "where", "last_op",
                           "suspect", "reason_class", "problems"], "ranks-table"),
        "<h2>Suspects</h2>",
        table_html([s.to_dict() for s in v.suspects],
                   ["rank", "host", "pid", "reason_class", "confidence", "reason", "evidence"], "suspects-table"),
        "<h2>Wait edges</h2>",
        table_html(_edge_rows(v), ["waiter", "waits_on", "where", "source", "reason"], "edges-table", max_rows=200),
        "<h2>Timeline</h2>", note,
        table_html(timeline, ["rank", "host", "state", "station", "order", "seq", "last_event", "source"],
                   "timeline-table"),
        "<h2>Hosts</h2>",
        table_html(_host_rows(v), ["host", "status", "action", "reasons", "evidence_missing"], "hosts-table"),
        _kernel_times_html(v),
        "<h2>Ranks by what their main thread does</h2>",
        table_html(v.classes, ["ranks", "count", "activity"], "classes-table"),
        "<h2>Merged stacks as text</h2>", f"<pre>{esc(chr(10).join(v.stack_lines))}</pre>",
    ]
    when = dt.datetime.now(dt.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    title = f"hang-forensics report: {v.culprit.label if v.culprit else 'no culprit named'}"
    page = "\n".join([
        "<!DOCTYPE html>", '<html lang="en"><head><meta charset="utf-8">',
        f"<title>{esc(title)}</title>", f"<style>{CSS}</style></head><body>",
        f"<h1>{esc(title)}</h1>",
        f'<p class="meta">input <code>{esc(v.source)}</code>; written {when} by hang-forensics {esc(__version__)}</p>',
        verdict_html(v), *sections, "</body></html>",
    ])
    # a lone surrogate from data (a JSON '\udcff' in a proc.json string) cannot be written as UTF-8: shown as
    # its escape, as the text outputs show it (found by benchmarks/fuzz_structured.py)
    return page.encode("utf-8", "backslashreplace").decode("utf-8")


def _edge_rows(v: ReportView) -> list[dict[str, Any]]:
    """The wait edges, folded: waiters that wait on the same rank for the same reason share a row."""
    groups: dict[tuple, list[int]] = {}
    for a, b, d in v.edges:
        where = d.get("comm") or d.get("op") or ""
        groups.setdefault((b, str(where), str(d.get("source") or ""), str(d.get("reason") or "")), []).append(a)
    return [{"waiter": fold(w) if len(w) > 1 else w[0], "waits_on": b, "where": where, "source": src, "reason": why}
            for (b, where, src, why), w in groups.items()]


def _kernel_times_html(v: ReportView) -> str:
    """The kernel lines the host judge set against the job's start, under the hosts table: the text's lines."""
    if not v.kernel_times:
        return ""
    return (f'<p class="meta">{esc(KERNEL_TIMES_TITLE)}:</p><ul id="kernel-times">'
            + "".join(f"<li>{esc(x)}</li>" for x in v.kernel_times) + "</ul>")


def _host_rows(v: ReportView) -> list[dict[str, Any]]:
    return [{"host": h.get("host"), "status": h.get("status"), "action": h.get("action_text") or h.get("action"),
             "reasons": [f"{r.get('id')}: {r.get('title')}" for r in h.get("reasons") or []],
             "evidence_missing": h.get("evidence_missing")} for h in v.hosts]


def write_report(what: Any, path: Path) -> Path:
    """Write the report (forensics.safefs: parent folders checked and made, a new file renamed over the name)."""
    path = Path(path)
    safefs.ensure_folder(path.parent)
    safefs.replace_file(path, build_report(what))
    return path
