"""Issue 26 item 1: one typed finding model. Every judge returns `Findings` through one protocol; reasons are
`ReasonClass` members at every creation site; citations carry their source where the evidence has one; every
wait edge the arbiter weighs is a typed `WaitEdge`; off-main-path observations are typed facts worded by
presentation; and no code parses evidence text back. Run on real captures (issue 26's H200 bundles and
logs folders, gloo and NCCL fixture bundles)."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

from hf_testpaths import FIXTURES
from parsers import knowledge
from forensics.report.words import analyze
from parsers.pipeline.analyze import JUDGES, run_judges
from parsers.pipeline.merge import wait_graph
from parsers.model.findings import (SOURCES, Citation, Findings, HostFact, HostNote, JudgeContext, Observation,
                                    ObservationKind, RankNote, ReasonClass, WaitEdge, of_rank)
from forensics.report.words.facts import observed

ROOT = Path(__file__).resolve().parents[3]
KB = knowledge.load(use_env=False)
ISSUE26 = FIXTURES / "issue26"
#: live bundles and post-mortem logs folders: recorder edges, p2p edges, a deadlock, a lock holder, host faults
CASES = [ISSUE26 / "deadlock" / "bundle.tar.gz", ISSUE26 / "deadlock" / "logs.tar.gz",
         ISSUE26 / "pipeline" / "logs.tar.gz", ISSUE26 / "lock" / "bundle.tar.gz", ISSUE26 / "order" / "bundle.tar.gz",
         ISSUE26 / "subgroup" / "logs.tar.gz"]
CASES += sorted(p.parent for p in FIXTURES.rglob("manifest.json"))[:12]
_CACHE: dict[Path, object] = {}


def _analysis(path: Path):
    if path not in _CACHE:
        _CACHE[path] = analyze(path, KB)
    return _CACHE[path]


def _all_suspects(v):
    for s in v.suspects:
        yield s
        yield from s.agreeing
        yield from s.consequences


def test_the_cases_exist():
    assert all(p.exists() for p in CASES) and len(CASES) >= 16  # a moved folder must not make these vacuous


@pytest.mark.parametrize("path", CASES, ids=lambda p: str(p.relative_to(FIXTURES)))
def test_every_judge_returns_findings_through_the_one_protocol(path):
    ev = _analysis(path).evidence
    found = run_judges(ev, JudgeContext(kb=KB))
    assert len(found) == len(JUDGES) and all(isinstance(f, Findings) for f in found)
    assert len({f.judge for f in found}) == len(JUDGES)  # each names itself: the arbiter reads findings by judge
    for f in found:
        assert f.source in SOURCES, f.judge
        assert all(s.source and isinstance(s.reason_class, ReasonClass) for s in f.suspects), f.judge
        assert all(isinstance(e, WaitEdge) for e in f.edges), f.judge


@pytest.mark.parametrize("path", CASES, ids=lambda p: str(p.relative_to(FIXTURES)))
def test_every_edge_of_the_verdicts_graphs_is_a_typed_edge(path):
    a = _analysis(path)
    found = run_judges(a.evidence, JudgeContext(kb=KB))
    edges = [e for f in found for e in f.global_edges()]
    logs = next(f for f in found if f.judge == "logs").graph
    for g in (a.verdict.graph, wait_graph(edges, logs)):
        for u, v, data in (g.edges(data=True) if g is not None else ()):
            e = data["edge"]
            assert isinstance(e, WaitEdge) and e.global_ranks and e.waiter == u, (u, v, data)
            assert e.peer == v or not isinstance(v, int)  # a node no file names ('unknown:<comm>') has no rank
            assert (e.p2p_seq is not None) == e.point_to_point  # p2p by peer and p2p seq, never a collective's seq
    if a.verdict.deadlock is not None:
        d = a.verdict.deadlock
        assert all(isinstance(e, WaitEdge) for e in d.edges) and len(d.wheres) == len(d.edges) and all(d.wheres)


def test_the_deadlock_names_each_edges_typed_scope_and_its_words_come_from_presentation():
    d = _analysis(ISSUE26 / "deadlock" / "bundle.tar.gz").verdict.deadlock
    assert d is not None and set(d.members) == {0, 1, 2}
    assert {e.comm_id for e in d.edges} and all(e.scope in ("group", "communicator") for e in d.edges)
    assert [w for _, _, w in d.hops] == list(d.wheres)
    assert all(x["comm"] == e.comm_id for x, e in zip(d.to_dict()["edges"], d.edges))


def test_a_point_to_point_edge_is_typed_by_peer_and_p2p_seq():
    found = run_judges(_analysis(ISSUE26 / "pipeline" / "logs.tar.gz").evidence, JudgeContext(kb=KB))
    p2p = next(f for f in found if f.judge == "p2p")
    assert p2p.edges and all(e.point_to_point and e.p2p_seq is not None and e.seq is None for e in p2p.edges)
    assert all(e.global_ranks for e in p2p.edges)  # the default group's ranks are global ranks


@pytest.mark.parametrize("path", CASES, ids=lambda p: str(p.relative_to(FIXTURES)))
def test_every_citation_is_typed_and_names_its_file_where_the_evidence_has_one(path):
    v = _analysis(path).verdict
    for s in _all_suspects(v):
        for e in s.evidence:
            assert isinstance(e, Citation) and e.tool, (s.reason_class, e)
            # the classes whose evidence is one line of one file say which
            if s.reason_class in (ReasonClass.RAISED, ReasonClass.KNOWN_ERROR, ReasonClass.HOST_FAULT) \
                    and e.tool in ("traceback", "knowledge base") and not str(e).startswith("recommended action"):
                assert e.file is not None, e
            if e.tool == "/proc" and s.rank is not None and str(e).startswith("now: state"):
                assert e.file and e.file.endswith("proc.json"), e


def test_the_lock_holders_why_cites_the_py_spy_file():
    v = _analysis(ISSUE26 / "lock" / "bundle.tar.gz").verdict
    why = [e for e in v.culprit.evidence if getattr(e, "why", None)]
    assert why and why[0].tool == "py-spy" and why[0].file.endswith("pyspy.json")


def test_a_plain_reason_or_observation_name_is_found_at_no_creation_site():
    """Every Suspect(...) in parsers/ and forensics/ gives its reason class as the enum, every Observation(...) its
    kind (the model refuses a str; this finds a site no fixture reaches)."""
    kinds = {k.value for k in ObservationKind}
    bad = []
    for path in [*ROOT.joinpath("parsers").rglob("*.py"), *ROOT.joinpath("forensics").rglob("*.py")]:
        for node in ast.walk(ast.parse(path.read_text())):
            name = getattr(node.func, "id", getattr(node.func, "attr", None)) if isinstance(node, ast.Call) else None
            if name in ("Suspect", "offer", "_suspect"):
                args = [k.value for k in node.keywords if k.arg == "reason_class"] + node.args[:4]
                bad += [f"{path}:{node.lineno}" for a in args
                        if isinstance(a, ast.Constant) and isinstance(a.value, str)
                        and ReasonClass.of(a.value) is not None]
            elif name == "Observation":
                args = [k.value for k in node.keywords if k.arg == "kind"] + node.args[:1]
                bad += [f"{path}:{node.lineno}" for a in args if isinstance(a, ast.Constant) and a.value in kinds]
    assert not bad, bad
    try:
        Observation("host")
    except TypeError:
        pass
    else:
        raise AssertionError("an observation of a plain kind name was accepted")


def test_typed_observations_are_worded_by_presentation():
    o = Observation(ObservationKind.HOST, facts=HostFact("gpu-b7", "exclude", "GPU has fallen off the bus",
                                           Citation("NVRM: Xid 79", file="hosts/gpu-b7/kernel.log", line=12)))
    # wording is the behaviour: presentation words a typed host fact
    assert observed(o) == "host gpu-b7 is to exclude: GPU has fallen off the bus [hosts/gpu-b7/kernel.log:12]"
    typed = 0
    for path in CASES:
        v = _analysis(path).verdict
        for o in v.observations:
            typed += 1  # every kind is typed: its words come from presentation
            assert o.facts is not None and not hasattr(o, "text") and observed(o), o
        if v.shows:  # where the lines under the verdict say what the evidence shows, they are presentation's words
            words = [observed(o) for o in v.observations]  # all of them, or under a culprit those said always
            assert v.shows == [w for w in words if w in v.shows] and set(v.shows) <= set(words)
    assert typed  # the cases hold such observations (RAS views, tracebacks...): the loop is not vacuous


def test_no_code_parses_evidence_text_back():
    """No 'also:' / 'demoted:' prefixes in parsers/; the arbiter and presentation never split, match or test the
    start of a citation's or a reason's words."""
    texts = {p: p.read_text() for p in ROOT.joinpath("parsers").rglob("*.py")}
    assert not [p for p, t in texts.items() if '"also: ' in t or '"demoted: ' in t]
    # the words (said(): does the reason name its own rank?) and the report view (cited(): do a citation's
    # words show their source?) read typed fields (Reason, Citation.tagged), not the words
    words = ROOT / "forensics" / "report" / "words"
    for path in ([ROOT / "parsers" / "pipeline" / n for n in ("merge.py", "sinks.py")]
                 + [words / "summary.py", words / "facts.py",
                    ROOT / "parsers" / "model" / "findings.py", ROOT / "forensics" / "report" / "view.py"]):
        t = path.read_text()
        assert not re.search(r"(evidence|citation|reason|\be)\b[\w\[\]\.\(\)]*\.(startswith|endswith|split"
                             r"|removeprefix)\("
                             r"|re\.(match|search|sub)", t), path
    # the view folds missing-evidence notes by their typed host (HostNote), with no pattern over their words
    assert "re.compile" not in (ROOT / "forensics" / "report" / "view.py").read_text()


def test_a_reason_that_names_its_rank_and_a_citation_that_shows_its_source_say_so_by_type():
    """said(suspect) drops 'rank N' only where the reason was made naming that rank (of_rank), never by its words;
    the report adds a citation's tool only where the citation was not made with its source in its words."""
    from forensics.report.view import cited
    from forensics.report.words import said
    from parsers.model.findings import Reason, Suspect, cite, of_rank

    typed = Suspect(rank=7, host="n", pid=3, reason_class=ReasonClass.NO_DUMP, reason=of_rank(7, "left no dump"),
                    confidence=0.9)
    # wording is the behaviour: said/cited compose the printed words
    assert isinstance(typed.reason, Reason) and typed.reason == "rank 7 left no dump" and said(typed) == "left no dump"
    plain = Suspect(rank=7, host="n", pid=3, reason_class=ReasonClass.NO_DUMP, reason="rank 7 left no dump",
                    confidence=0.9)
    other = Suspect(rank=2, host="n", pid=3, reason_class=ReasonClass.NO_DUMP, reason=of_rank(7, "left no dump"),
                    confidence=0.9)
    # wording is the behaviour: the label is kept where the reason was not made for this rank
    assert said(plain) == "rank 7 left no dump" and said(other) == "rank 7 left no dump"  # not typed, or another rank's
    # wording is the behaviour: a citation made with its source in its words gets no second tag
    assert cited(cite("main thread at f (a.py:1) [py-spy]", tool="py-spy",
                      tagged=True)) == "main thread at f (a.py:1) [py-spy]"
    assert cited(cite("ring neighbours [5, 7]", tool="nccl-log")) == "ring neighbours [5, 7] [nccl-log]"
    import copy
    assert said(copy.deepcopy(typed)) == "left no dump" and copy.deepcopy(cite("x [y]", tool="y", tagged=True)).tagged
    # the culprits of real captures: the ones whose reason names their rank say it once in the summary
    for path in CASES:
        v = _analysis(path).verdict
        for s in v.suspects:
            assert said(s) != s.reason or not isinstance(s.reason, Reason) or s.reason.rank != s.rank, s


def test_typed_strings_keep_their_type_and_fields_through_copy_and_pickle():
    """Citation, HostNote, RankNote and Reason are str subclasses whose fields are set in __new__: copy, deepcopy
    and pickle make each again from its fields (__reduce__), so none comes back as a plain str or loses a field."""
    import copy
    import pickle
    made = [Citation("waits [trace.log:12]", file="trace.log", line=12, tool="nccl-log", tagged=True),
            HostNote("node07", "py-spy: failed"), RankNote(3, "node07", 412, "gdb: timeout"),
            of_rank(3, "never logged")]
    for thing in made:
        for again in (copy.copy(thing), copy.deepcopy(thing), pickle.loads(pickle.dumps(thing))):
            assert type(again) is type(thing) and again == thing and vars(again) == vars(thing), (thing, vars(again))


def test_a_reason_class_is_found_by_its_name_or_itself_and_none_for_another_name():
    assert ReasonClass.of("stopped") is ReasonClass.STOPPED
    assert ReasonClass.of(ReasonClass.MISSING) is ReasonClass.MISSING
    assert ReasonClass.of(Citation("raised", tool="x")) is ReasonClass.RAISED  # a typed str reads as its words
    assert ReasonClass.of("no-such-class") is None and ReasonClass.of("STOPPED") is None  # by value, not member name
    assert ReasonClass.STOPPED.observed and ReasonClass.STOPPED.default_confidence == 0.95
