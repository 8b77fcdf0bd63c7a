"""Notebook API for post-mortems: load a bundle, look at the verdict, tables and pictures.

    from forensics.report import postmortem
    pm = postmortem.load("bundle-dir-or.tar.gz")
    pm                    # verdict summary, rendered as HTML
    pm.ranks              # pandas DataFrame, one row per rank
    pm.stack_tree         # merged stack prefix tree (nested dict)
    pm.waitfor            # networkx.DiGraph, edge waiter -> waited-on
    pm.timeline           # last operation reached per rank
    pm.show_graph(); pm.show_stack_tree(); pm.show_timeline()
    pm.report("report.html")

See docs/notebook-api.md.
"""

from forensics.report.postmortem.loader import from_bundle, load
from forensics.report.postmortem.session import PostMortem

__all__ = ["PostMortem", "from_bundle", "load"]
