"""PostMortem: one loaded bundle, with its verdict, tables and pictures, for notebooks.

Everything shown is read from one `ReportView` (forensics.report.view), built once from the
verdict and the logs judge's results when first used: the tables, the wait-for graph, the
timeline and the pictures are the same facts `forensics analyze` and `forensics report` show.
Tables come back as pandas DataFrames when pandas is installed (lists of dicts otherwise);
pictures come back as inline SVG objects that Jupyter shows, and the object itself renders as
an HTML summary when it is the last expression of a cell. The dependency is one way: this
module uses the report's renderers; the report never imports the notebook API.
"""

from __future__ import annotations

import functools
import html
from pathlib import Path
from typing import Any

import networkx as nx

from forensics import safefs
from forensics.report.graph import MAX_RANK_NODES, draw_waitfor
from forensics.report.html import verdict_html, write_report
from forensics.report.lastop import TimelineEntry
from forensics.report.stacktree import draw_stack_tree
from forensics.report.style import to_svg
from forensics.report.timeline import MAX_LANES, draw_timeline
from forensics.report.view import ReportView, build_view
from forensics.report.waitgraph import edges_table
from forensics.report.words import worded
from parsers.model import Suspect, Verdict


class SVG:
    """An SVG picture that Jupyter renders inline and that can be saved to a file."""

    def __init__(self, svg: str, title: str = "") -> None:
        self.svg = svg
        self.title = title

    def _repr_svg_(self) -> str:
        return self.svg

    def __repr__(self) -> str:
        return f"<SVG picture: {self.title}>"

    def save(self, path: str | Path) -> Path:
        """Write the picture as an .svg file."""
        path = Path(path)
        safefs.replace_file(path, self.svg)  # parents checked as root; a link at the name replaced, not followed
        return path

    def __str__(self) -> str:
        return self.svg


def as_table(rows: list[dict[str, Any]]) -> Any:
    """A pandas DataFrame of `rows` when pandas is installed, else the rows themselves."""
    try:
        import pandas as pd
    except ImportError:
        return rows
    return pd.DataFrame(rows)


class PostMortem:
    """A bundle's verdict and evidence, ready to look at. Make one with `forensics.report.postmortem.load`."""

    def __init__(self, verdict: Verdict, source: str, graph: nx.DiGraph | None = None,
                 events: list[dict[str, Any]] | None = None, evidence: Any = None, logs: Any = None) -> None:
        self.verdict = worded(verdict)  # a verdict straight from parsers has no words yet
        self.source = source  #: the path it was loaded from
        self.evidence = evidence  #: parsers.gather.evidence.Evidence it was judged on
        self.logs = logs  #: parsers.judges.logs.LogAnalysis, where the input had logs
        self._graph = graph
        self._events = events or []

    @functools.cached_property
    def view(self) -> ReportView:
        """The one view every output renders (built once, on first use)."""
        return build_view(self.verdict, source=self.source, evidence=self.evidence, logs=self.logs,
                          graph=self._graph, events=self._events)

    # --- data -------------------------------------------------------------------------
    @property
    def culprit(self) -> Suspect | None:
        """The most likely suspect, or None."""
        return self.verdict.culprit

    @property
    def summary(self) -> str:
        return self.verdict.summary

    @property
    def host_faults(self) -> list[dict[str, Any]]:
        """Hosts to exclude or suspect, folded by finding, with the action (what the verdict leads with)."""
        return [f.to_dict() for f in self.view.host_faults]

    @property
    def ranks(self) -> Any:
        """One row per rank: host, pid, state, what its main thread does, suspect flags."""
        return as_table(self.rank_rows())

    def rank_rows(self) -> list[dict[str, Any]]:
        """`ranks` as a list of dicts (no pandas needed): stacks and logs merged, suspect flags set."""
        return self.view.rank_rows

    @property
    def suspects(self) -> Any:
        """The suspects, most likely first, as a table."""
        return as_table([s.to_dict() for s in self.verdict.suspects])

    @property
    def stack_tree(self) -> dict[str, Any]:
        """The merged main-thread stack tree: nested {'frame', 'ranks', 'children'}."""
        return self.view.stack_tree

    @property
    def merged_stack_tree(self) -> dict[str, Any]:
        """`stack_tree` with address-only native frames normalised ('?? [libc.so.6]'), so like ranks merge."""
        return self.view.merged_stack_tree

    @property
    def stack_tree_text(self) -> str:
        return "\n".join(self.view.stack_lines)

    @property
    def waitfor(self) -> nx.DiGraph:
        """Wait-for graph (networkx.DiGraph, edge waiter -> waited-on), suspects marked on nodes."""
        return self.view.graph

    @property
    def waitfor_edges(self) -> Any:
        return as_table(edges_table(self.waitfor))

    @property
    def timeline_entries(self) -> list[TimelineEntry]:
        return self.view.timeline

    @property
    def timeline(self) -> Any:
        """Per rank: the last operation reached and its position in program order."""
        return as_table([e.to_dict() for e in self.timeline_entries])

    # --- pictures ---------------------------------------------------------------------
    def show_graph(self, max_nodes: int | None = None) -> SVG:
        """The wait-for graph, culprit in red; large jobs collapse into classes of ranks."""
        return SVG(to_svg(draw_waitfor(self.waitfor, max_nodes or MAX_RANK_NODES)), "wait-for graph")

    def show_stack_tree(self) -> SVG:
        """The merged stack tree, one box per branch with its ranks."""
        suspects = {s.rank for s in self.verdict.suspects if s.rank is not None}
        culprit = self.culprit.rank if self.culprit else None
        return SVG(to_svg(draw_stack_tree(self.merged_stack_tree, suspects, culprit, note=self.view.no_stack_note())),
                   "merged stack tree")

    def show_timeline(self, max_lanes: int | None = None) -> SVG:
        """Lanes of ranks up to the last operation each reached."""
        return SVG(to_svg(draw_timeline(self.timeline_entries, max_lanes or MAX_LANES, axis=self.view.timeline_axis)),
                   "last operation reached")

    def show_verdict(self) -> "HTML":
        """The verdict as an HTML block (summary, culprit, evidence, missing evidence)."""
        return HTML(verdict_html(self.view))

    def report(self, path: str | Path) -> Path:
        """Write the self-contained HTML report (what `forensics report` writes)."""
        return write_report(self.view, Path(path))

    def _repr_html_(self) -> str:
        return f"<div><p><code>{html.escape(self.source)}</code></p>{verdict_html(self.view)}</div>"

    def __repr__(self) -> str:
        return f"PostMortem({self.source!r}: {self.verdict.summary})"


class HTML:
    """A piece of HTML that Jupyter renders inline."""

    def __init__(self, body: str) -> None:
        self.body = body

    def _repr_html_(self) -> str:
        return self.body

    def __str__(self) -> str:
        return self.body

