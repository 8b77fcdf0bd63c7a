"""Each rule that a judge and the scale path decide by is stated once (issue 43 item 2): the rules, where each
lives, and a scan of the code that fails where one is defined twice.

Why a scan: a rule copied under another name, or its constants written out again, decides the same today and
differently after the next change to one copy (the stacks judge named a rank stopped that the scale path, with
its own list of states, did not read). The scan looks for what a copy is made of: a second function of a rule's
name, a function with a rule's body, and the state letters the process-state rule compares, outside its module."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from parsers.judges.stacks import class_rows
from parsers.model import states
from parsers.model.events import ProcessState
from parsers.model.looks import Look
from parsers.model.ranksets import of_ranks
from parsers.model.summaries import RankSummary, StackClass
from parsers.stacks.classify import Activity
from parsers.model.waits import wait_ends

ROOT = Path(__file__).resolve().parents[3]

#: rule -> the one module that states it; each is called, not copied, by the judges and the scale path
RULES = {
    # a process state that decides by itself (the stacks judge's stopped / exited / in the kernel; the scale
    # path's 'frozen' flag; the merge's ranks never demoted; the second look's stopped and gone)
    "state_rule": "parsers/model/states.py",
    "stopped": "parsers/model/states.py",
    "gone": "parsers/model/states.py",
    "frozen": "parsers/model/states.py",
    # where the recorder's waits end: waited on, waiting on none (the recorder judge's 'stalled'; the focus's
    # ranks read at the ends of the waits; the class judgement's recorder ranks that wait on none)
    "wait_ends": "parsers/model/waits.py",
    # an error of a process's own that is no wait on a peer (the scale path's 'error' flag, the focus's and
    # digest first's reading of job-level files, the suspect's first cause)
    "own_error": "parsers/model/events.py",
    # the recorder's wait edges (the recorder judge's, and what a host's digest says each rank waits on)
    "wait_edges": "parsers/judges/recorder.py",
    # the classes section: ranks by what their main threads do (the stacks judge's over the ranks it read, the
    # focus's over every rank the digests summarised)
    "class_rows": "parsers/judges/stacks.py",
    # the scale path's triage over classes: which ranks' raw files analysis opens
    "judge_classes": "parsers/scale/classes.py",
    "_minorities": "parsers/scale/classes.py",  # a bar smaller than its histogram's tallest
    "_by_kind_op": "parsers/scale/classes.py",  # stack classes compared by what the main thread does, in which op
    "_recorder_sinks": "parsers/scale/classes.py",  # waited on and waiting on none; silent members
    "_p2p_waits": "parsers/scale/classes.py",  # both ends of each wait the stack-peer matching draws
    "rank_flags": "parsers/scale/digest.py",  # a rank's own oddities, made where its files are
    # the stack-peer matching (py-spy --locals' peers): a main thread's blocking send/recv, an op's test, the waits
    # and wrong peers (the p2p judge's over the ranks read; a host's digest's summary; the class judgement's)
    "blocking_call": "parsers/judges/p2p_stacks.py",
    "stack_op": "parsers/judges/p2p_stacks.py",
    "judge_stacks": "parsers/judges/p2p_stacks.py",
    "unanswered": "parsers/judges/p2p.py",  # sends nobody answers, over rows a rank and a digest's class both give
}
#: names of rules that were re-statements and are gone
GONE = ("odd_ones_out", "_minority", "_minority_map")
#: the letters the process-state rule compares (`parsers.model.states`)
STATE_LETTERS = frozenset(states.FROZEN_STATES)
#: every letter /proc gives a process state (a collection of other letters is no list of states)
PROC_LETTERS = frozenset("RSDZTtXxKWPI")


def _modules(*packages: str):
    for pkg in packages:
        for path in sorted((ROOT / pkg).rglob("*.py")):
            yield str(path.relative_to(ROOT)), ast.parse(path.read_text())


def _body(node: ast.FunctionDef | ast.AsyncFunctionDef) -> str:
    """A function's body without its docstring, as the AST prints it (names of locals included)."""
    body = node.body[1:] if node.body and isinstance(node.body[0], ast.Expr) \
        and isinstance(node.body[0].value, ast.Constant) else node.body
    return ast.dump(ast.Module(body=body, type_ignores=[]))


def _functions():
    """(name, module, body, top level) of every function in the code."""
    for rel, tree in _modules("parsers", "forensics"):
        top = {id(n) for n in tree.body}
        for node in ast.walk(tree):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                yield node.name, rel, _body(node), id(node) in top


def _state_letters(tree: ast.AST):
    """Line numbers where code compares against the state letters itself: a literal collection of them
    (`state in ("T", "t")`, `in (None, "Z", "X")`, a tuple of the frozen states) or `== "D"` (the zombie's 'Z'
    alone is wording: a zombie is told from a dead process in what is said of it, not in who is named)."""
    for node in ast.walk(tree):
        if isinstance(node, (ast.Tuple, ast.List, ast.Set)) and node.elts \
                and all(isinstance(e, ast.Constant) and (e.value is None or e.value in PROC_LETTERS)
                        for e in node.elts) \
                and {e.value for e in node.elts} & STATE_LETTERS:  # type: ignore[attr-defined]
            yield node.lineno
        if isinstance(node, ast.Compare) and any(isinstance(op, (ast.Eq, ast.NotEq)) for op in node.ops) \
                and any(isinstance(c, ast.Constant) and c.value in STATE_LETTERS - {"Z"} for c in node.comparators):
            yield node.lineno


def _wait_end_tests(tree: ast.AST):
    """Line numbers where code tests 'waited on and waiting on none' itself (`... waited_on_by and not
    ....waits_on`) instead of asking `wait_ends`."""
    def names(node: ast.AST) -> set[str]:
        return {n.attr for n in ast.walk(node) if isinstance(n, ast.Attribute)} | \
            {n.id for n in ast.walk(node) if isinstance(n, ast.Name)}

    for node in ast.walk(tree):
        if isinstance(node, ast.BoolOp) and isinstance(node.op, ast.And):
            negated = [v for v in node.values if isinstance(v, ast.UnaryOp) and isinstance(v.op, ast.Not)]
            if any("waits_on" in names(v) for v in negated) and any(
                    {"waited_on_by", "waiters"} & names(v) for v in node.values if v not in negated):
                yield node.lineno


def _class_row_literals(tree: ast.AST):
    """Line numbers where code writes a row of the classes section itself ({'activity', 'ranks', 'count'})."""
    for node in ast.walk(tree):
        if isinstance(node, ast.Dict) and {k.value for k in node.keys if isinstance(k, ast.Constant)} \
                >= {"activity", "ranks", "count"}:
            yield node.lineno


def test_each_rule_is_defined_once():
    found = list(_functions())
    for name, home in RULES.items():
        where = [rel for n, rel, _, top in found if n == name and top]
        assert where == [home], (name, where)
    assert not [(n, rel) for n, rel, _, _ in found if n in GONE]
    bodies = {name: body for name, rel, body, top in found if top and RULES.get(name) == rel}
    for name, body in bodies.items():
        copies = [(n, rel) for n, rel, b, _ in found if b == body and n != name]
        assert not copies, (name, copies)


def test_the_state_letters_are_compared_in_the_state_rule_only():
    """The judges, the scale path, the model and the pipeline ask `parsers.model.states`; none lists the letters."""
    copies = [(rel, line) for rel, tree in _modules("parsers") if rel != RULES["state_rule"]
              for line in _state_letters(tree)]
    assert not copies, copies


def test_where_waits_end_is_tested_in_the_wait_rule_only():
    copies = [(rel, line) for rel, tree in _modules("parsers") for line in _wait_end_tests(tree)]
    assert not copies, copies


def test_a_row_of_the_classes_section_is_written_in_its_rule_only():
    copies = [(rel, line) for rel, tree in _modules("parsers", "forensics") if rel != RULES["class_rows"]
              for line in _class_row_literals(tree)]
    assert not copies, copies


def test_the_scan_finds_a_copy():
    """The scan is not blind: a judge that lists the stopped states itself, or compares with 'D', is found."""
    assert list(_state_letters(ast.parse('if r.state in ("T", "t"):\n    pass\n'))) == [1]
    assert list(_state_letters(ast.parse('FROZEN = ("T", "t", "Z", "X", "D")\n'))) == [1]
    assert list(_state_letters(ast.parse('x = r.state == "D"\n'))) == [1]
    assert list(_state_letters(ast.parse('x = look.state in (None, "Z", "X")\n'))) == [1]
    assert list(_class_row_literals(ast.parse('r = {"activity": a.text, "ranks": f, "count": n}\n'))) == [1]
    assert list(_wait_end_tests(ast.parse('x = rp.has_state and waiters and not rp.waits_on\n'))) == [1]
    assert not list(_wait_end_tests(ast.parse('x = rp.has_state and waiters and rp.waits_on\n')))
    assert not list(_state_letters(ast.parse('x = r.state == "Z"\ny = r.state == "R"\nz = c in ("t", "h")\n')))


@pytest.mark.parametrize("letter, said", [("T", "stopped"), ("t", "stopped"), ("Z", "gone"), ("X", "gone"),
                                          ("D", "kernel"), ("R", None), ("S", None), (None, None)])
def test_one_rank_and_its_summary_decide_alike(letter, said):
    """The views the rule reads, from /proc, a look and a host's digest, give one answer for one state."""
    views = [ProcessState(pid=7, state=letter or ""), Look(t=0.0, state=letter),
             RankSummary.from_json(RankSummary(rank=3, pid=7, state=letter).to_json())]
    if letter is None:
        views = views[1:]  # /proc always has a letter
    for view in views:
        assert states.state_rule(view) == said, view
        assert states.frozen(view) is (said is not None)
        assert states.stopped(view) is (said == "stopped") and states.gone(view) is (said == "gone")


def test_where_waits_end_one_rank_or_a_class():
    """A chain ends at the rank waited on that waits on none; a cycle has no end; a class of 100,000 ranks that
    each wait on the next ends at the last, as one set of ranks does."""
    assert wait_ends(of_ranks([1, 2]), of_ranks([0, 1])) == [[2, 2]]
    assert wait_ends(of_ranks([0, 1, 2]), of_ranks([0, 1, 2])) == []
    assert wait_ends([[1, 99_999]], [[0, 99_998]]) == [[99_999, 99_999]]


def test_the_classes_section_of_ranks_read_and_of_classes_agree():
    """The stacks judge's rows over ranks read one by one and the focus's over a merged digest's classes are the
    same rows for the same ranks."""
    wait, late = Activity("collective", "allreduce", "train.py:80"), Activity("elsewhere", None, "train.py:47")
    by_rank = [(wait, of_ranks([0, 1, 2, 4, 5, 6, 7])), (late, of_ranks([3]))]
    by_class = [(StackClass("elsewhere", None, "train.py:47", (), [[3, 3]]), [[3, 3]]),
                (StackClass("collective", "allreduce", "train.py:80", (), [[0, 2], [4, 7]]), [[0, 2], [4, 7]])]
    assert class_rows(by_rank) == class_rows(by_class) == [
        {"activity": "wait in allreduce", "ranks": "0-2,4-7", "count": 7},
        {"activity": "run outside any collective at train.py:47", "ranks": "3", "count": 1}]
