"""The words of a verdict, in one place: presentation's, made from the typed results parsers/ returns.

Why here: parsers/ reads, models, judges and arbitrates; it returns a `Verdict` whose words are
empty (summary, leads, stragglers, consequences, what the evidence shows, each demotion's words,
each deadlock edge's place). `worded` fills them from the typed fields, and it is the one producer
of a verdict's words: every forensics caller (the CLI's analyze, hosts and demo, bisect, the
post-mortem loader, the fleet's tree analysis, the report view, the JSON output) gets them through
it, directly or through `analyze` below, or through `forensics.report.view.build_view`.

- facts.py: one typed observation in words (what 'the evidence shows' says);
- summary.py: the summary sentence and the lines under it, and the words of typed wait edges,
  demotions and deadlocks.
"""

from __future__ import annotations

from typing import Any

from forensics.report.words import summary
from forensics.report.words.facts import observed
from forensics.report.words.summary import said
from parsers.gather.evidence import Evidence
from parsers.pipeline import analyze as pipeline
from parsers.model.findings import Verdict

__all__ = ["analyze", "analyze_evidence", "observed", "said", "worded"]


def worded(verdict: Verdict) -> Verdict:
    """`verdict` with its words filled from its typed fields, in place. A verdict that has its words already
    (worded before, or made with them: the post-mortem's synthetic example) is left as it is, so every view
    may call this and a verdict is worded once."""
    if not verdict.summary:  # every verdict parsers/ returns has none; every worded one has one
        summary.write(verdict, verdict.progress, verdict.slow)
    return verdict


def analyze(path: Any, *args: Any, **kwargs: Any) -> pipeline.Analysis:
    """parsers.pipeline.analyze.analyze (same arguments), its verdict worded: what every caller that shows it wants."""
    result = pipeline.analyze(path, *args, **kwargs)
    worded(result.verdict)
    return result


def analyze_evidence(ev: Evidence, kb: Any = None) -> pipeline.Analysis:
    """parsers.pipeline.analyze.analyze_evidence, its verdict worded."""
    result = pipeline.analyze_evidence(ev, kb)
    worded(result.verdict)
    return result

