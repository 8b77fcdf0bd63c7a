"""Stack readers and classification on real py-spy and gdb output captured from hung gloo ranks."""

from __future__ import annotations

from hf_testpaths import FIXTURES
from parsers.readers.gdb import read_gdb_json
from parsers.readers.pyspy import read_pyspy_json
from parsers.stacks.classify import classify
from forensics.report.stacktree import render_tree
from parsers.stacks.tree import build_tree

STACKS = FIXTURES / "stacks"


def test_pyspy_waiter_is_in_all_reduce():
    threads = read_pyspy_json(STACKS / "pyspy_waiter_rank0.json")
    main = next(t for t in threads if t.is_main)
    act = classify(main)
    assert act.kind == "collective" and act.op == "all_reduce"
    assert "train_step" in act.where


def test_pyspy_sleeper_is_elsewhere():
    threads = read_pyspy_json(STACKS / "pyspy_sleeper_rank2.json")
    main = next(t for t in threads if t.is_main)
    act = classify(main)
    assert act.kind == "elsewhere" and "slow_data_loader" in act.where


def test_gdb_shows_gloo_and_store_threads():
    threads = read_gdb_json(STACKS / "gdb_new_group_rank0.json")
    names = {t.name for t in threads}
    assert "pt_gloo_runloop" in names
    main = next(t for t in threads if t.is_main)
    assert any("c10d::" in f.function for f in main.frames)
    assert classify(main).kind == "collective"


def test_tree_isolates_the_odd_rank():
    waiter = next(t for t in read_pyspy_json(STACKS / "pyspy_waiter_rank0.json") if t.is_main)
    sleeper = next(t for t in read_pyspy_json(STACKS / "pyspy_sleeper_rank2.json") if t.is_main)
    tree = build_tree({0: waiter, 1: waiter, 2: sleeper, 3: waiter})
    text = "\n".join(render_tree(tree))
    assert "[0-1,3] all_reduce" in text
    assert "[2] slow_data_loader" in text
    assert tree.ranks == {0, 1, 2, 3}
