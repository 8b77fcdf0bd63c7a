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

from parsers.judges.stacks import class_rows, compare_stacks
from parsers.model import states
from parsers.model.events import ProcessState
from parsers.model.findings import CULPRIT_MIN_CONFIDENCE
from parsers.model.looks import Look
from parsers.model.majority import (ahead_confidence, bars, minorities, minority_ahead, mismatch_confidence,
                                    odd_sides, strict_minority, tallest)
from parsers.model.ranksets import of_ranks, ranks_of
from parsers.model.summaries import ClassSummary, RankSummary, StackClass, gathered
from parsers.scale.classes import judge_classes
from parsers.scale.merge import outliers
from parsers.stacks.classify import Activity
from parsers.model.waits import silent_members, wait_ends

ROOT = Path(__file__).resolve().parents[3]

#: rule -> the one module that states it; each is called, not copied, by the judges and the scale path
RULES = {
    # a process state that decides by itself (the stacks judge's stopped / exited / in the kernel; the scale
    # path's 'frozen' flag; the merge's ranks never demoted; the second look's stopped and gone)
    "state_rule": "parsers/model/states.py",
    "stopped": "parsers/model/states.py",
    "gone": "parsers/model/states.py",
    "frozen": "parsers/model/states.py",
    "letter_rule": "parsers/model/states.py",  # the same over a letter read from /proc (collectors, the guard)
    "signal_stopped": "parsers/model/states.py",  # stopped by a signal, not a tracer (the guard re-stops it)
    # where the recorder's waits end: waited on, waiting on none (the recorder judge's 'stalled'; the focus's
    # ranks read at the ends of the waits; the class judgement's recorder ranks that wait on none)
    "wait_ends": "parsers/model/waits.py",
    # the ends of the waits that left no recorder state (the recorder judge's 'no recorder state while its peers wait
    # on it'; the class judgement reads every rank without state while one is silent)
    "silent_members": "parsers/model/waits.py",
    # a communicator's waits over its comm ranks (the focus's wait graph and the class judgement's silent members)
    "comm_waits": "parsers/model/summaries.py",
    "comm_ranks": "parsers/model/summaries.py",
    "job_ranks": "parsers/model/summaries.py",  # its inverse: where a communicator's waits end, as job ranks
    # a sink cycle of waits (the verdict's deadlock; the focus reads those of a wait graph through the job)
    "roots_and_cycles": "parsers/judges/logs/waitgraph.py",
    # an error of a process's own that is no wait on a peer (the scale path's 'error' flag, the focus's and
    # digest first's reading of job-level files, the suspect's first cause)
    "own_error": "parsers/model/events.py",
    # what a file says its own process did wrong: its exceptions and its own errors (a rank's 'exception' and 'error'
    # flags on its host; the job-level files digest first reads raw; the processes the focus reads for such a file)
    "own_faults": "parsers/model/events.py",
    "fault_flags": "parsers/model/events.py",
    # the processes a file names in an exit, exception or error, and where they are (`Claims.processes`): digest
    # first reads them raw, the focus reads their hosts
    "named": "parsers/scale/named_faults.py",
    "exits_named": "parsers/scale/named_faults.py",  # a launcher exit's rank, host and pid
    # the rank an exception is of (the exceptions judge's 'raised'; the rank the scale path reads for a job's file)
    "exception_rank": "parsers/judges/exceptions.py",
    # each rank's last exception, whichever file holds it (the exceptions judge's, the suspect's own state's 'last
    # exception', a host's digest's summary of each rank), and what a digest's bounded copy of a file keeps of them
    "exceptions_by_rank": "parsers/judges/exceptions.py",
    "last_exceptions": "parsers/judges/exceptions.py",
    "kept_exceptions": "parsers/judges/exceptions.py",
    "spawn_raised": "parsers/judges/exceptions.py",  # the exception mp.spawn's exit line speaks of (the summary's)
    # the recorder's wait edges (the recorder judge's, and what a host's digest says each rank waits on)
    "wait_edges": "parsers/judges/recorder.py",
    # the classes section: ranks by what their main threads do (the stacks judge's over the ranks it read, the
    # focus's over every rank the digests summarised)
    "class_rows": "parsers/judges/stacks.py",  # (and the merged digest's stack classes said a line each)
    # the stack-class rule: outside every collective while others wait, waiting in another call than the majority's,
    # a minority that went ahead (the stacks judge names them; the class judgement reads their raw files)
    "compare_stacks": "parsers/judges/stacks.py",
    # where most stand, ties included (a communicator's positions in the class judgement and the outliers said to
    # people; a position's sides in the logs judge; the position most wait in and its sides in the recorder judge's
    # order; the majority's wait in the stack-class rule)
    "tallest": "parsers/model/majority.py",
    "minorities": "parsers/model/majority.py",  # a bar shorter than its histogram's tallest
    # the odd one out that went ahead: the few at one place past the many at one other (the logs judge's positions,
    # the stacks judge's classes in `compare_stacks`, the recorder judge's entered op), and how sure that claim is
    "minority_ahead": "parsers/model/majority.py",
    "ahead_confidence": "parsers/model/majority.py",
    # how sure naming a call mismatch's minority is, and whether its count is settled (the logs judge's positions,
    # the recorder judge's order)
    "mismatch_confidence": "parsers/model/majority.py",
    "settled": "parsers/model/majority.py",
    # who called something else at one position: the odd sides, the tie (every side a lead), the reference and how
    # sure (the logs judge's positions of NCCL/c10d logs, the recorder judge's positions of its rings)
    "odd_sides": "parsers/model/majority.py",
    # the ranks a report names behind are believed as a strict minority of those it saw (the logs judge's desync
    # report and Flight Recorder analyzer's missing ranks)
    "strict_minority": "parsers/model/majority.py",
    "bars": "parsers/model/majority.py",  # ranks read one by one as the histogram those rules read
    # the scale path's triage over classes: which ranks' raw files analysis opens
    "judge_classes": "parsers/scale/classes.py",
    "_recorder_sinks": "parsers/scale/classes.py",  # waited on and waiting on none; silent members
    "_p2p_waits": "parsers/scale/classes.py",  # both ends of each wait the stack-peer matching draws
    "rank_flags": "parsers/scale/digest.py",  # a rank's own oddities, made where its files are
    # the stack-peer matching (py-spy --locals' peers): a main thread's blocking send/recv, an op's test, the waits
    # and wrong peers (the p2p judge's over the ranks read; a host's digest's summary; the class judgement's)
    "blocking_call": "parsers/judges/p2p_stacks.py",
    "stack_op": "parsers/judges/p2p_stacks.py",
    "judge_stacks": "parsers/judges/p2p_stacks.py",
    "unanswered": "parsers/judges/p2p.py",  # sends nobody answers, over rows a rank and a digest's class both give
    # which point-to-point call a main thread is in (the p2p judge's `_blocked_in`, the stacks judge's mismatch): its
    # activity's op where a Python frame names it, c10d's C++ names only on a stack with none (gdb's); the side of a
    # call, and the window of Python frames the call and its peer are read in (the activity, `blocking_call`)
    "p2p_call": "parsers/stacks/classify.py",
    "p2p_side": "parsers/model/stacks.py",
    "is_p2p": "parsers/model/stacks.py",  # a call that waits on its one peer (stack-class rule, unanswered sends)
    "native_p2p_call": "parsers/model/stacks.py",
    "python_frames": "parsers/model/stacks.py",
}
#: names of rules that were re-statements and are gone
GONE = ("odd_ones_out", "_minority", "_minority_map", "_by_kind_op", "_common_wait", "_minorities",
        "_named")  # the focus's own reading of what a job-level file names (now `named`, as digest first's)
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
            if any({"waits_on", "has_state"} & names(v) for v in negated) and any(
                    {"waited_on_by", "waiters"} & names(v) for v in node.values if v not in negated):
                yield node.lineno


def _class_row_literals(tree: ast.AST):
    """Line numbers where code writes a row of the classes section itself ({'activity', 'ranks', 'count'})."""
    for node in ast.walk(tree):
        if isinstance(node, ast.Dict) and {k.value for k in node.keys if isinstance(k, ast.Constant)} \
                >= {"activity", "ranks", "count"}:
            yield node.lineno


def _stack_kind_tests(tree: ast.AST, rule: str = "compare_stacks"):
    """Line numbers where code tests a main thread's kind 'elsewhere' itself (`act.kind == "elsewhere"`: the
    start of a second stack-class rule), outside `compare_stacks`."""
    inside = {id(n) for f in ast.walk(tree) if isinstance(f, ast.FunctionDef) and f.name == rule for n in ast.walk(f)}
    for node in ast.walk(tree):
        if isinstance(node, ast.Compare) and id(node) not in inside and any(
                isinstance(c, ast.Constant) and c.value == "elsewhere" for c in [node.left, *node.comparators]):
            yield node.lineno


#: names only torch.distributed's and c10d's point-to-point calls have (the model's SENDS, RECVS, P2P_CALLS, NATIVE_P2P)
P2P_NAMES = frozenset({"isend", "irecv", "batch_isend_irecv", "recvAnysource", "::send", "::recv"})


def _p2p_name_lists(tree: ast.AST):
    """Line numbers where code lists the point-to-point calls' names itself (a set, tuple, list or dict holding
    `isend` or c10d's `recvAnysource`): the start of a second answer to which call a rank is in, beside the
    model's lists."""
    for node in ast.walk(tree):
        elts = node.keys if isinstance(node, ast.Dict) else getattr(node, "elts", None)
        if isinstance(node, (ast.Tuple, ast.List, ast.Set, ast.Dict)) and any(
                isinstance(e, ast.Constant) and e.value in P2P_NAMES for e in elts or ()):
            yield node.lineno


def _majority_picks(tree: ast.AST):
    """Line numbers where code picks where most stand itself: `Counter.most_common(1)` (its tie-break is the order
    the keys came in, a second rule beside `tallest`)."""
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "most_common" \
                and node.args and isinstance(node.args[0], ast.Constant) and node.args[0].value == 1:
            yield node.lineno


def _fault_tests(tree: ast.AST):
    """Line numbers where code picks a file's own faults itself: `own_error` asked event by event beside the
    file's exceptions (the scale path asks `own_faults` / `fault_flags`)."""
    for node in ast.walk(tree):
        if isinstance(node, ast.Name) and node.id == "own_error" \
                or isinstance(node, ast.alias) and node.name == "own_error":
            yield getattr(node, "lineno", 0)


def _exit_reads(tree: ast.AST):
    """Line numbers where code walks launcher exits itself (`for x in ev.exits`, `... for x in parsed.exits`): the
    start of a second reading of which process an exit names, beside `exits_named` and `Claims.processes`."""
    for node in ast.walk(tree):
        if isinstance(node, (ast.For, ast.comprehension)) and isinstance(node.iter, ast.Attribute) \
                and node.iter.attr == "exits":
            yield getattr(node, "lineno", None) or node.iter.lineno


def _ahead_confidences(tree: ast.AST):
    """Line numbers where code writes the went-ahead claim's confidence itself (`0.6 + 0.2 * share`: the end of a
    second went-ahead rule beside `minority_ahead`, found in the logs, stacks and recorder judges before)."""
    for node in ast.walk(tree):
        if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add) and isinstance(node.left, ast.Constant) \
                and node.left.value == 0.6 and any(isinstance(c, ast.Constant) and c.value == 0.2
                                                   for c in ast.walk(node.right)):
            yield node.lineno


def _mismatch_confidences(tree: ast.AST):
    """Line numbers where code writes a mismatch's confidence itself (`0.6 + 0.35 * share if settled else 0.45`:
    a second copy beside `mismatch_confidence`, as the logs and recorder-order judges each had)."""
    for node in ast.walk(tree):
        if isinstance(node, ast.IfExp) and isinstance(node.orelse, ast.Constant) and node.orelse.value == 0.45 \
                and any(isinstance(c, ast.Constant) and c.value == 0.35 for c in ast.walk(node.body)):
            yield node.lineno


def _calls_tallest(node: ast.AST) -> bool:
    """A call of `tallest(...)`: the reference side taken by hand when its [0] is read."""
    return isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "tallest"


def _side_picks(tree: ast.AST):
    """Line numbers where code decides a call mismatch's sides itself: asks how sure one is (`mismatch_confidence`,
    `settled`: only `odd_sides` asks, the judges read its answer), or takes the first of the tallest sides as the
    reference (`tallest(counts)[0]`, directly or through a name: the tie broken by the order keys came in, as the
    logs and recorder judges each did beside one another)."""
    lines = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Name) and node.id in ("mismatch_confidence", "settled") \
                or isinstance(node, ast.alias) and node.name in ("mismatch_confidence", "settled"):
            lines.add(getattr(node, "lineno", 0))
    for fn in ast.walk(tree):
        if not isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Module)):
            continue
        held = {t.id for n in ast.walk(fn) if isinstance(n, ast.Assign) and _calls_tallest(n.value)
                for t in n.targets if isinstance(t, ast.Name)}
        for n in ast.walk(fn):
            if isinstance(n, ast.Subscript) and isinstance(n.slice, ast.Constant) and n.slice.value == 0 \
                    and (_calls_tallest(n.value) or isinstance(n.value, ast.Name) and n.value.id in held):
                lines.add(n.lineno)
    yield from sorted(lines)


def _exception_reads(tree: ast.AST):
    """(line, function) where code reads a file's exceptions itself (`art.parsed.exceptions`, `parsed.exceptions`;
    function: the innermost one it is in, '' at module level): the start of a second answer to whose an exception
    is, or which is a rank's last (the digest took the last of each file as its owner's), beside
    `exceptions_by_rank`."""
    where: dict[int, str] = {}
    for fn in ast.walk(tree):
        if isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)):
            for n in ast.walk(fn):
                where[id(n)] = fn.name  # walked outer first: an inner function's name is written last
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and node.attr == "exceptions" and (
                isinstance(node.value, ast.Attribute) and node.value.attr == "parsed"
                or isinstance(node.value, ast.Name) and node.value.id == "parsed"):
            yield node.lineno, where.get(id(node), "")


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


#: modules that may not import the rule, each with why: the letters are compared there, once
STATE_LETTERS_EXCUSED = {
    # the tool supervisor runs as `python -I -S` on the standard library only (it starts in 20 ms, imports nothing
    # of ours): it restores a target's state after a tool, by the same letters
    "forensics/collect/supervise.py": "standard library only",
}


def test_the_state_letters_are_compared_in_the_state_rule_only():
    """The judges, the scale path, the model, the pipeline, and the collectors and their guard (which read /proc
    themselves) ask `parsers.model.states`; none lists the letters (but the stdlib-only supervisor, said why)."""
    copies = [(rel, line) for rel, tree in _modules("parsers", "forensics")
              if rel != RULES["state_rule"] and rel not in STATE_LETTERS_EXCUSED for line in _state_letters(tree)]
    assert not copies, copies
    assert all(list(_state_letters(tree)) for rel, tree in _modules("forensics") if rel in STATE_LETTERS_EXCUSED)


def test_where_waits_end_is_tested_in_the_wait_rule_only():
    copies = [(rel, line) for rel, tree in _modules("parsers") for line in _wait_end_tests(tree)]
    assert not copies, copies


def test_a_row_of_the_classes_section_is_written_in_its_rule_only():
    copies = [(rel, line) for rel, tree in _modules("parsers", "forensics") if rel != RULES["class_rows"]
              for line in _class_row_literals(tree)]
    assert not copies, copies


def test_the_stack_kinds_are_compared_in_the_stack_rule_only():
    """The judges and the scale path ask `compare_stacks` who is outside, mismatched or ahead; none tests the kind."""
    copies = [(rel, line) for rel, tree in _modules("parsers/judges", "parsers/scale", "parsers/pipeline")
              for line in _stack_kind_tests(tree)]
    assert not copies, copies


def test_where_most_stand_is_picked_in_its_rule_only():
    """The judges, the scale path and the pipeline ask `tallest` (a line width or a step's phase is no rank's place)."""
    copies = [(rel, line) for rel, tree in _modules("parsers/judges", "parsers/scale", "parsers/pipeline")
              for line in _majority_picks(tree)]
    assert not copies, copies


def test_who_went_ahead_is_decided_in_its_rule_only():
    """The logs, stacks and recorder judges ask `minority_ahead` and `ahead_confidence`; none writes the claim's
    confidence itself."""
    copies = [(rel, line) for rel, tree in _modules("parsers", "forensics") if rel != RULES["minority_ahead"]
              for line in _ahead_confidences(tree)]
    assert not copies, copies


def test_how_sure_a_mismatch_is_is_said_in_its_rule_only():
    copies = [(rel, line) for rel, tree in _modules("parsers", "forensics") if rel != RULES["mismatch_confidence"]
              for line in _mismatch_confidences(tree)]
    assert not copies, copies


def test_the_point_to_point_calls_are_named_in_the_model_only():
    """The judges, the readers, the stack classes and the scale path read `parsers.model.stacks`' lists; none
    lists torch's or c10d's point-to-point names again (the p2p judge, the classifier and the py-spy reader each
    had their own)."""
    copies = [(rel, line) for rel, tree in _modules("parsers", "forensics") if rel != RULES["p2p_side"]
              for line in _p2p_name_lists(tree)]
    assert not copies, copies
    assert list(_p2p_name_lists(ast.parse('SENDS = frozenset({"send", "isend"})\n'))) == [1]
    assert list(_p2p_name_lists(ast.parse('x = n.endswith(("::send", "::recv"))\n'))) == [1]
    assert list(_p2p_name_lists(ast.parse('SIDE = {"recvAnysource": "recv"}\n'))) == [1]
    assert not list(_p2p_name_lists(ast.parse('x = c.func.lower() in ("send", "recv")\n')))


def test_who_called_something_else_is_decided_in_its_rule_only():
    """The logs and recorder judges ask `odd_sides` for a position's odd sides, its tie and its reference; none counts
    the calls and picks the first tallest, or weighs a side, itself (the scale path compares no calls)."""
    copies = sorted({(rel, line) for rel, tree in _modules("parsers", "forensics") if rel != RULES["odd_sides"]
                     for line in _side_picks(tree)})
    assert not copies, copies


@pytest.mark.parametrize("n", [8, 100_000])
def test_the_odd_sides_one_rank_or_a_class(n):
    """One rule for a position's calls, at 8 ranks and at 100,000: one rank of n that called something else is named
    (settled: every rank seen); a tie of two sides, each of one rank (the real two-rank excerpt, nccl#1409) or of
    n/2, lists both sides as leads below the naming bar, each against the other; a plurality that the odd ones
    together outnumber is only a lead; the same call everywhere has no side."""
    calls = {r: "allreduce" for r in range(n)} | {3: "broadcast"}
    (one,) = odd_sides(calls, 0)
    assert (one.called, one.ranks, one.reference, one.n_reference, one.tie) == ("broadcast", (3,), "allreduce",
                                                                                 n - 1, False)
    assert one.settled and one.confidence == mismatch_confidence(n - 1, 1, 0) >= CULPRIT_MIN_CONFIDENCE
    assert odd_sides(calls, None)[0].confidence < CULPRIT_MIN_CONFIDENCE  # the group's size not known
    for half in (1, n // 2):
        tie = {r: "broadcast" if r < half else "allreduce" for r in range(2 * half)}
        sides = odd_sides(tie, 0)
        assert [(s.called, s.reference, s.tie, len(s.ranks)) for s in sides] == [
            ("broadcast", "allreduce", True, half), ("allreduce", "broadcast", True, half)]
        assert all(s.confidence < CULPRIT_MIN_CONFIDENCE and not s.settled for s in sides)
    few = {r: "allreduce" if r < 3 else "broadcast" if r < 5 else "allgather" for r in range(7)}
    assert [(s.called, s.tie, s.confidence) for s in odd_sides(few, 0)] == [("broadcast", False, 0.45),
                                                                            ("allgather", False, 0.45)]
    assert odd_sides({r: "allreduce" for r in range(n)}, 0) == []


@pytest.mark.parametrize("n", [8, 100_000])
def test_a_strict_minority_one_rank_or_a_class(n):
    """A report naming one rank of n behind is believed; naming half of them, or all, or none, is not."""
    assert strict_minority(1, n) and strict_minority(n // 2 - 1, n)
    assert not strict_minority(n // 2, n) and not strict_minority(n, n) and not strict_minority(0, n)


@pytest.mark.parametrize("n", [8, 100_000])
def test_how_sure_a_mismatch_is_one_rank_or_a_class(n):
    """One rank calls something else than n - 1: settled where every rank was seen, a lead while enough ranks were
    not seen to tip it, or their number is not known; a tie is never settled."""
    assert mismatch_confidence(n - 1, 1, 0) == {8: 0.906, 100_000: 0.95}[n]
    assert mismatch_confidence(n // 2, n // 2, 0) == mismatch_confidence(n // 2, 1, n // 2 - 1) == 0.45
    assert mismatch_confidence(n - 1, 1, None) == 0.45
    assert 0.45 < mismatch_confidence(n - 3, 1, 2) <= mismatch_confidence(n - 1, 1, 0)  # 2 unseen cannot tip it


def test_a_files_own_faults_are_picked_in_their_rule_only():
    copies = [(rel, line) for rel, tree in _modules("parsers/scale") for line in _fault_tests(tree)]
    assert not copies, copies


def test_the_exits_a_file_names_are_read_in_their_rule_only():
    """The scale path (a rank's 'exited' flag on its host, digest first's raw reads, the focus's hosts) asks
    `exits_named` which process a launcher exit names; none walks the exits and matches them by pid itself."""
    copies = [(rel, line) for rel, tree in _modules("parsers/scale") if rel != RULES["exits_named"]
              for line in _exit_reads(tree)]
    assert not copies, copies


#: (module, function) that read a file's exceptions themselves, each with why that is no second rule of whose they are
EXCEPTION_READS_EXCUSED = {
    # the rule's home: the exceptions judge's own readings
    ("parsers/judges/exceptions.py", "exceptions_by_rank"): "the rule",
    ("parsers/judges/exceptions.py", "spawn_raised"): "the rule",
    ("parsers/judges/exceptions.py", "_raised_before"): "the judge's died-first order",
    # every exception a file holds marks the process whose file it is, to be read raw (a rank's 'exception' flag,
    # digest first's job-level files): where the raw file is, not whose exception it is (`named` asks
    # `exception_rank` that)
    ("parsers/model/events.py", "own_faults"): "where the raw file is",
    # a digest's bounded copy of a file keeps what `kept_exceptions` says and encodes it: it names no rank
    ("parsers/scale/digest.py", "reduce_parsed"): "a bounded copy",
}


def test_whose_exception_it_is_is_decided_in_its_rule_only():
    """The judges, the scale path, the model and the pipeline ask the exceptions judge which exception is a rank's
    (`exceptions_by_rank`, `last_exceptions`, `spawn_raised`); only the readers, which make the list, and the excused
    (said why) read a file's exceptions themselves."""
    reads = {(rel, fn) for rel, tree in _modules("parsers", "forensics")
             if not rel.startswith(("parsers/readers/", "parsers/gather/")) for _, fn in _exception_reads(tree)}
    assert not reads - set(EXCEPTION_READS_EXCUSED), sorted(reads - set(EXCEPTION_READS_EXCUSED))
    assert set(EXCEPTION_READS_EXCUSED) <= reads  # an excuse of a function that no longer reads them goes too


def test_the_scan_finds_a_copy():
    """The scan is not blind: a judge that lists the stopped states itself, or compares with 'D', is found."""
    assert list(_state_letters(ast.parse('if r.state in ("T", "t"):\n    pass\n'))) == [1]
    assert list(_state_letters(ast.parse('FROZEN = ("T", "t", "Z", "X", "D")\n'))) == [1]
    assert list(_state_letters(ast.parse('x = r.state == "D"\n'))) == [1]
    assert list(_state_letters(ast.parse('x = look.state in (None, "Z", "X")\n'))) == [1]
    assert list(_exit_reads(ast.parse('for x in ev.exits:\n    by_pid[x.pid] = x\n'))) == [1]
    assert list(_exit_reads(ast.parse('exits = [x for a in arts if a.parsed for x in a.parsed.exits]\n'))) == [1]
    assert not list(_exit_reads(ast.parse('out.exits = list(parsed.exits[:8])\n')))
    assert list(_fault_tests(ast.parse('x = art.parsed.exceptions or any(map(own_error, art.parsed.events))\n')))
    picked = ast.parse('if art.parsed.exceptions:\n    x = art.parsed.exceptions[-1]\n')
    assert [line for line, _ in _exception_reads(picked)] == [1, 2]
    named = ast.parse('def f(parsed):\n    return next(e for e in parsed.exceptions if e.rank)\n')
    assert list(_exception_reads(named)) == [(2, "f")]
    assert not list(_exception_reads(ast.parse('x = merged.exceptions + read.merged.exceptions\n')))
    assert list(_ahead_confidences(ast.parse('c = round(0.6 + 0.2 * len(before) / len(stated), 3)\n'))) == [1]
    assert not list(_ahead_confidences(ast.parse('c = 0.6 + 0.3 * share\n')))
    assert list(_mismatch_confidences(ast.parse('c = round(0.6 + 0.35 * s, 3) if ok else 0.45\n'))) == [1]
    assert not list(_mismatch_confidences(ast.parse('c = 0.6 if world and seen >= world else 0.45\n')))
    assert list(_majority_picks(ast.parse('major, n = Counter(sigs.values()).most_common(1)[0]\n'))) == [1]
    # the two judges' copies before `odd_sides`: the first tallest as the reference, and a side weighed by itself
    assert list(_side_picks(ast.parse('def f(counts):\n    tied = tallest(counts)\n    major = tied[0]\n'))) == [3]
    assert list(_side_picks(ast.parse('major = tallest(Counter(sigs.values()))[0]\n'))) == [1]
    assert list(_side_picks(ast.parse('c = mismatch_confidence(n_major, len(odd), unseen)\n'))) == [1]
    assert list(_side_picks(ast.parse('from parsers.model.majority import settled\n'))) == [1]
    assert not list(_side_picks(ast.parse('top = set(tallest(sizes))\nfirst = next(iter(tallest(firsts)), None)\n')))
    assert list(_stack_kind_tests(ast.parse('x = {r for r, a in acts.items() if a.kind == "elsewhere"}\n'))) == [1]
    assert not list(_stack_kind_tests(ast.parse('def compare_stacks(c):\n    return c.kind == "elsewhere"\n')))
    assert list(_class_row_literals(ast.parse('r = {"activity": a.text, "ranks": f, "count": n}\n'))) == [1]
    assert list(_wait_end_tests(ast.parse('x = rp.has_state and waiters and not rp.waits_on\n'))) == [1]
    assert not list(_wait_end_tests(ast.parse('x = rp.has_state and waiters and rp.waits_on\n')))
    assert list(_wait_end_tests(ast.parse('x = not rp.has_state and waiters\n'))) == [1]
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


def test_the_stack_rule_over_one_rank_each_and_over_classes():
    """The stacks judge's classes (each rank's activity, a rank set of the ranks that share it) and a merged
    digest's classes of 100,000 ranks are compared by the one rule: the same odd ones for the same shape."""
    wait, late = Activity("collective", "allreduce", "train.py:80"), Activity("elsewhere", None, "train.py:47")
    cast = Activity("collective", "broadcast", "train.py:90")
    few = compare_stacks([(wait, of_ranks([0, 1, 2, 4, 5, 6])), (late, of_ranks([3])), (cast, of_ranks([7]))])
    many = compare_stacks([(StackClass("collective", "allreduce", "train.py:80", (), [[0, 2], [4, 99_998]]),
                            [[0, 2], [4, 99_998]]),
                           (StackClass("elsewhere", None, "train.py:47", (), [[3, 3]]), [[3, 3]]),
                           (StackClass("collective", "broadcast", "train.py:90", (), [[99_999, 99_999]]),
                            [[99_999, 99_999]])])
    assert (few.outside, few.mismatched, few.odd) == ([[3, 3]], [[7, 7]], [[3, 3], [7, 7]])
    assert (many.outside, many.mismatched, many.odd) == ([[3, 3]], [[99_999, 99_999]], [[3, 3], [99_999, 99_999]])
    assert few.common.op == many.common.op == "allreduce"


@pytest.mark.parametrize("n", [8, 100_000])
def test_the_stack_rule_names_who_went_ahead_not_the_many(n):
    """A minority waits in one collective while every other rank runs at one place: the minority is odd, not the
    many (at 100,000 the many are one class, not 99,998 ranks to read)."""
    ahead = compare_stacks([(Activity("elsewhere", None, "train.py:47"), [[0, n - 3]]),
                            (Activity("collective", "all_reduce", "train.py:80"), [[n - 2, n - 1]])])
    assert (ahead.ahead, ahead.behind, ahead.outside) == ([[n - 2, n - 1]], [[0, n - 3]], [])
    assert ahead.odd == [[n - 2, n - 1]]
    # the same shape in a send: it waits for its one peer, so the many are outside and nobody went ahead
    p2p = compare_stacks([(Activity("elsewhere", None, "train.py:47"), [[0, n - 3]]),
                          (Activity("collective", "send", "train.py:80"), [[n - 2, n - 1]])])
    assert (p2p.ahead, p2p.outside) == ([], [[0, n - 3]])
    # a send beside the majority's all_reduce is no mismatch: it waits for its one peer (the p2p judges pair it, and
    # the class judgement reads the ends of its wait by their rule, `_p2p_waits`)
    sends = compare_stacks([(Activity("collective", "all_reduce", "t.py:1"), [[0, n - 3]]),
                            (Activity("collective", "send", "t.py:2"), [[n - 2, n - 1]])])
    assert (sends.mismatched, sends.odd) == ([], [])
    # ranks with no stack are set apart while fewer than those with one (nothing places them); a tie of two waits
    # is decided by the class of the lowest rank, in any order given
    tie = [(Activity("collective", "broadcast", "t.py:1"), [[4, 7]]), (Activity("collective", "all_reduce", "t.py:2"),
                                                                         [[0, 3]]), (Activity("unknown"), [[8, 8]])]
    for order in (tie, tie[::-1]):
        got = compare_stacks(order)
        assert (got.common.op, got.mismatched, got.unseen) == ("all_reduce", [[4, 7]], [[8, 8]])


def test_a_tie_of_the_tallest_is_one_fact():
    """Two positions that tie are both where most stand: neither is a minority, in the class judgement and in the
    outliers said to people (which kept the larger key as the most common and listed the other)."""
    tie = {"allreduce@10": [[0, 3]], "allreduce@11": [[4, 7]], "allreduce@9": [[8, 8]]}
    assert tallest({k: len(v) for k, v in {"a": [1, 2], "b": [3, 4], "c": [5]}.items()}) == ["a", "b"]
    assert minorities(tie) == [[8, 8]] and minorities({"x": [[0, 99_999]]}) == []
    merged = ClassSummary(comms={"0xabc": tie})
    assert outliers(merged) == {"0xabc": ["allreduce@9: ranks 8"]}
    assert list(ranks_of(judge_classes(merged).ranks)) == [8]


def test_silent_members_one_rank_or_a_class():
    """Comm rank 1 is waited on and left no state: silent, as the recorder judge names it; a class of 100,000 ranks
    waiting on one stateless peer says the same of it; a peer with state that waits on none is an end, not silent."""
    assert silent_members(of_ranks([1, 2]), of_ranks([0]), of_ranks([0, 2])) == [[1, 1]]
    assert silent_members([[0, 0]], [[1, 99_999]], [[1, 99_999]]) == [[0, 0]]
    assert silent_members([[0, 0]], [[1, 99_999]], [[0, 99_999]]) == []


def test_ranks_without_state_are_read_only_while_one_waited_on_is_silent():
    """Over classes, which job rank a stateless comm rank is, only its own state would say: every rank without state
    is read while a comm rank waited on left none; where every peer waited on has state, none of them is."""
    def summary(silent: bool) -> ClassSummary:
        rows = [("h0", RankSummary(rank=r, pid=100 + r, recorder=(("abc", r, r),), waits_on=(("abc", 0),)))
                for r in range(1, 4)]
        rows += [("h0", RankSummary(rank=9, pid=109))]  # a rank of another job part, no recorder at all
        if not silent:
            rows.append(("h0", RankSummary(rank=0, pid=100, recorder=(("abc", 0, 0),))))
        return gathered(rows)
    assert list(ranks_of(judge_classes(summary(True)).ranks)) == [9]
    assert list(ranks_of(judge_classes(summary(False)).ranks)) == [0]


@pytest.mark.parametrize("n", [8, 100_000])
def test_who_went_ahead_one_rank_each_or_a_class(n):
    """One rank past every other rank, all at one position: the rank went ahead, whether the ranks come one by one
    (the logs and recorder judges) or as one class of n - 1 (a merged digest); the scale path reads that rank
    (`minorities`) and no one of the many. A tie, a split majority or a majority of one is no odd one out."""
    one_by_one = bars([*((10, r) for r in range(n - 1)), (11, n - 1)])
    assert one_by_one == {10: [[0, n - 2]], 11: [[n - 1, n - 1]]}
    as_class = {10: [[0, n - 2]]}
    assert minority_ahead({11: one_by_one[11]}, {10: one_by_one[10]}) and minority_ahead({11: [[n - 1, n - 1]]},
                                                                                       as_class)
    assert ahead_confidence([[n - 1, n - 1]], as_class[10]) == {8: 0.775, 100_000: 0.8}[n]  # more agree, surer
    merged = ClassSummary(comms={"0xabc": {"allreduce@10": [[0, n - 2]], "allreduce@11": [[n - 1, n - 1]]}})
    assert minorities(merged.comms["0xabc"]) == [[n - 1, n - 1]]
    assert list(ranks_of(judge_classes(merged).ranks)) == [n - 1]
    half = n // 2
    assert not minority_ahead({11: [[0, half - 1]]}, {10: [[half, n - 1]]})  # a tie: nobody is the few
    assert not minority_ahead({11: [[0, 0]]}, {9: [[1, 3]], 10: [[4, n - 1]]})  # the many disagree
    assert not minority_ahead({11: [[0, 0]]}, {10: [[1, 1]]})  # one against one
    assert not minority_ahead({11: [[0, 0]], 12: [[1, 1]]}, {10: [[2, n - 1]]})  # the few at two places
