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
from typing import TYPE_CHECKING, Any, Sequence

from forensics import __version__
from parsers.model import Verdict

if TYPE_CHECKING:
    from forensics.postmortem.session import PostMortem

BIG_JOB = 64  #: past this many ranks, tables list suspects first

CSS = """
body{font-family:system-ui,-apple-system,'Segoe UI',sans-serif;margin:24px auto;max-width:1250px;color:#222;padding:0 16px}
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


def verdict_html(verdict: Verdict) -> str:
    """Summary, culprit with evidence, other suspects, missing evidence."""
    c = verdict.culprit
    # inline styles as well as classes: notebooks show this block without the report's stylesheet
    box = "border-left:6px solid #d62728;background:#fdf1f1" if c else "border-left:6px solid #999;background:#f4f4f4"
    parts = [f'<div class="verdict{"" if c else " none"}" id="verdict" style="{box};padding:12px 16px;margin:12px 0">',
             f'<div class="summary" style="font-size:16px;font-weight:600">VERDICT: {esc(verdict.summary)}</div>']
    if c:
        parts.append(f'<p>culprit: <span class="culprit" id="culprit" style="color:#d62728;font-weight:700">{esc(c.label)}</span> '
                     f'[{esc(c.reason_class)}, confidence {c.confidence:.2f}]</p>')
        if c.evidence:
            parts.append("<ul>" + "".join(f"<li>{esc(e)}</li>" for e in c.evidence) + "</ul>")
        parts.append(f"<p>sources that agree: {esc(', '.join(c.sources) or 'unknown')}</p>")
    lines = [("hang", f"{verdict.hang}" + (f" ({verdict.hang_basis})" if verdict.hang_basis else ""))]
    lines += [("consequence", x) for x in verdict.consequences] + [("lead", x) for x in verdict.leads]
    lines += [("straggler", x) for x in verdict.stragglers]
    lines += [("the evidence shows", x) for x in verdict.shows if x not in verdict.summary]
    parts.append('<ul class="lines">' + "".join(f"<li>{esc(k)}: {esc(v)}</li>" for k, v in lines) + "</ul>")
    if len(verdict.suspects) > 1:
        parts.append("<p>other suspects:</p><ul>" + "".join(
            f"<li>{esc(s.label)} {esc(s.reason)} [{esc(s.reason_class)}, {s.confidence:.2f}]</li>" for s in verdict.suspects[1:]) + "</ul>")
    parts.append("</div>")
    if verdict.missing_evidence:
        parts.append("<p><b>missing evidence:</b></p><ul>" + "".join(f"<li>{esc(m)}</li>" for m in verdict.missing_evidence) + "</ul>")
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
    return sorted(rows, key=lambda r: (not r.get("culprit"), not r.get("suspect"), r.get("rank") is None, r.get("rank") or 0))


def figure_html(svg: str, figure_id: str, caption: str) -> str:
    return f'<div class="figure" id="{figure_id}" role="img" aria-label="{esc(caption)}">{svg}</div>'


def build_report(pm: "PostMortem") -> str:
    """The whole report as one HTML string."""
    graph_svg = pm.show_graph().svg
    tree_svg = pm.show_stack_tree().svg
    timeline_svg = pm.show_timeline().svg
    ranks = pm.rank_rows()
    timeline = [e.to_dict() for e in pm.timeline_entries]
    note = ""
    if len(ranks) > BIG_JOB:  # the suspects would drown: put them on top
        ranks = suspects_first(ranks)
        timeline = suspects_first(timeline)
        note = f'<p class="meta">{len(ranks)} ranks: suspects first, then by rank.</p>'
    sections = [
        "<h2>Wait-for graph</h2>", figure_html(graph_svg, "waitfor-graph", "wait-for graph, culprit in red"),
        "<h2>Last operation reached</h2>", figure_html(timeline_svg, "timeline", "last operation reached per rank"),
        "<h2>Merged stacks</h2>", figure_html(tree_svg, "stack-tree", "merged stack tree with rank counts"),
        "<h2>Ranks</h2>", note, table_html(ranks, ["rank", "host", "pid", "state", "activity", "op", "where", "suspect", "reason_class", "problems"], "ranks-table"),
        "<h2>Suspects</h2>", table_html([s.to_dict() for s in pm.verdict.suspects], ["rank", "host", "pid", "reason_class", "confidence", "reason", "evidence"], "suspects-table"),
        "<h2>Timeline</h2>", note, table_html(timeline, ["rank", "host", "state", "station", "order", "seq", "last_event", "source"], "timeline-table"),
        "<h2>Ranks by what their main thread does</h2>", table_html(pm.verdict.sections.get("classes") or [], ["ranks", "count", "activity"], "classes-table"),
        "<h2>Merged stacks as text</h2>", f"<pre>{esc(pm.stack_tree_text)}</pre>",
    ]
    when = dt.datetime.now(dt.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    title = f"hang-forensics report: {pm.verdict.culprit.label if pm.verdict.culprit else 'no culprit named'}"
    return "\n".join([
        "<!DOCTYPE html>", '<html lang="en"><head><meta charset="utf-8">',
        f"<title>{esc(title)}</title>", f"<style>{CSS}</style></head><body>",
        f"<h1>{esc(title)}</h1>",
        f'<p class="meta">bundle <code>{esc(pm.source)}</code>; written {when} by hang-forensics {esc(__version__)}</p>',
        verdict_html(pm.verdict), *sections, "</body></html>",
    ])


def write_report(pm: "PostMortem", path: Path) -> Path:
    """Write the report; creates the parent folder."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(build_report(pm), encoding="utf-8")
    return path


