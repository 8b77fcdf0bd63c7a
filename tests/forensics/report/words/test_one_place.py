"""Issue 29 item 1: the words of a verdict are made in one place, forensics/report/words.

parsers/ reads, models, judges and arbitrates: it returns a verdict typed, its words empty. A module of
parsers/ that words a verdict (writes its summary or lines, a demotion's words, a deadlock edge's place)
or imports the wording would put presentation back in two places; these checks fail then.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from hf_testpaths import FIXTURES
from forensics.report import words
from forensics.report.view import build_view
from parsers import knowledge
from parsers.pipeline.analyze import analyze as typed_analyze

ROOT = Path(__file__).resolve().parents[4]
WORDS = ROOT / "forensics" / "report" / "words"
#: a verdict's fields that hold words (Verdict's summary and lines, Demotion.said, Deadlock.wheres)
WORD_FIELDS = {"summary", "leads", "stragglers", "shows", "wheres", "said"}
#: made with its words on purpose, outside the wording: the post-mortem's synthetic example verdict
HAND_MADE = {ROOT / "forensics" / "report" / "postmortem" / "synthetic.py"}
KB = knowledge.load(use_env=False)
#: a deadlock (its edges' places), demoted claims, a running job (the progress line) and a slow rank (stragglers)
CASES = [FIXTURES / "issue26" / "deadlock" / "bundle.tar.gz", FIXTURES / "issue26" / "pipeline" / "bundle.tar.gz",
         FIXTURES / "second_look" / "running-gloo", FIXTURES / "straggler" / "straggle"]


def _word_writes(path: Path) -> list[str]:
    """Where `path` writes a verdict's words: an assignment to a word field (a verdict's `consequences` too,
    not a suspect's, which are typed), or a Verdict(...) made with words."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Call) and getattr(node.func, "id", getattr(node.func, "attr", None)) == "Verdict":
            found += [f"{path}:{node.lineno}: Verdict({k.arg}=...)" for k in node.keywords if k.arg in WORD_FIELDS]
        targets = (node.targets if isinstance(node, ast.Assign)
                   else [node.target] if isinstance(node, (ast.AugAssign, ast.AnnAssign)) else [])
        for t in (x for tt in targets for x in (tt.elts if isinstance(tt, ast.Tuple) else [tt])):
            if not isinstance(t, ast.Attribute) or ast.unparse(t.value) == "view":  # the report view's own fields
                continue
            if t.attr in WORD_FIELDS or (t.attr == "consequences" and ast.unparse(t.value).endswith("verdict")):
                found.append(f"{path}:{t.lineno}: {ast.unparse(t)}")
    return found


def _imports(path: Path) -> set[str]:
    out = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom) and node.module:
            out |= {node.module} | {f"{node.module}.{a.name}" for a in node.names}
        elif isinstance(node, ast.Import):
            out |= {a.name for a in node.names}
    return out


def test_parsers_has_no_wording_module_and_imports_no_wording():
    parsers = sorted((ROOT / "parsers").rglob("*.py"))
    assert len(parsers) > 50  # the walk sees the package (a moved folder must not make this vacuous)
    assert [p for p in parsers if p.stem in ("present", "summary")] == []
    wording = [(p, m) for p in parsers for m in _imports(p)
               if m.startswith("forensics") or m.split(".")[-1] in ("present", "summary")]
    assert wording == []


def test_only_the_wording_writes_a_verdicts_words():
    writes = [w for pkg in ("parsers", "forensics") for p in sorted((ROOT / pkg).rglob("*.py"))
              if WORDS not in p.parents and p not in HAND_MADE for w in _word_writes(p)]
    assert writes == []
    assert len([w for p in sorted(WORDS.rglob("*.py")) for w in _word_writes(p)]) >= 5  # the scan finds writes


def _demotions(verdict) -> list:
    return [x.demotion for s in verdict.suspects for x in (s, *s.agreeing, *s.consequences) if x.demotion is not None]


def test_the_cases_hold_what_is_worded():
    verdicts = [typed_analyze(c, KB).verdict for c in CASES]
    assert verdicts[0].deadlock is not None and _demotions(verdicts[1])
    assert verdicts[2].progress.running and verdicts[3].slow.named


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.parent.name if c.suffix else c.name)
def test_parsers_returns_a_verdict_without_words_and_the_wording_fills_them(case):
    """The same input, typed by parsers and worded by presentation: the typed fields are the same, the words
    empty until worded; the report's JSON is the same whichever entry worded it."""
    typed = typed_analyze(case, KB).verdict
    assert typed.summary == "" and typed.leads == typed.stragglers == typed.consequences == typed.shows == []
    assert all(d.said == "" for d in _demotions(typed)) and (typed.deadlock is None or typed.deadlock.wheres == ())
    before = [{**s.to_dict(), "demoted": None} for s in typed.suspects]

    assert words.worded(typed) is typed and typed.summary
    assert all(d.said for d in _demotions(typed))
    assert (typed.deadlock is None
            or len(typed.deadlock.wheres) == len(typed.deadlock.edges) and all(typed.deadlock.wheres))
    assert [{**s.to_dict(), "demoted": None} for s in typed.suspects] == before  # wording changes no typed field
    again = words.analyze(case, KB).verdict
    assert _but_sections(again.to_dict()) == _but_sections(typed.to_dict()) and again.text == typed.text
    # the view words too (sections aside: an archive's sections name the temporary folder it was read from)
    viewed = build_view(typed_analyze(case, KB).verdict)
    assert _but_sections(viewed.to_json()) == _but_sections(build_view(again).to_json())


def _but_sections(data: dict) -> dict:
    return {k: v for k, v in data.items() if k != "sections"}
