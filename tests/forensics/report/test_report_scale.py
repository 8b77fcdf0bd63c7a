"""At 4,096 ranks the pictures stay readable: a handful of nodes, lanes and boxes, the culprit alone."""

from __future__ import annotations

import pytest



from forensics.report.postmortem.session import PostMortem  # noqa: E402
from forensics.report.postmortem.synthetic import synthetic_verdict  # noqa: E402
from forensics.report.graph import collapse, draw_waitfor  # noqa: E402
from forensics.report.stacktree import _all, boxes  # noqa: E402
from forensics.report.style import to_svg  # noqa: E402
from forensics.report.timeline import MAX_LANES, lanes  # noqa: E402
from parsers.model.findings import ReasonClass  # noqa: E402


@pytest.fixture(scope="module")
def big() -> PostMortem:
    return PostMortem(synthetic_verdict(4096, culprit=1234, stopped=3000, missing=4000, laggards=16),
                      source="synthetic")


def test_graph_collapses_to_few_nodes_with_suspects_alone(big: PostMortem):
    graph = big.waitfor
    assert graph.number_of_nodes() == 4096
    collapsed = collapse(graph)
    nodes = [collapsed.nodes[k]["node"] for k in collapsed.nodes]
    assert len(nodes) <= 8
    alone = {n.ranks[0] for n in nodes if len(n.ranks) == 1}
    assert {1234, 3000, 4000} <= alone
    assert sum(len(n.ranks) for n in nodes) == 4096  # every rank is in exactly one node
    culprit = [n for n in nodes if n.culprit]
    assert [n.ranks for n in culprit] == [[big.culprit.rank]]
    waiting = max(nodes, key=lambda n: len(n.ranks))
    assert len(waiting.ranks) == 4096 - 3 - 16 and waiting.label == "waits in all_reduce"


def test_graph_picture_names_the_culprit_and_the_classes(big: PostMortem):
    svg = to_svg(draw_waitfor(big.waitfor))
    assert f"CULPRIT rank {big.culprit.rank}" in svg
    assert "(4077)" in svg and "shown as 5 classes" in svg
    assert svg.count("<text") < 80  # readable: not one label per rank


def test_many_suspects_fold_by_kind_but_the_culprit_stays_alone():
    verdict = synthetic_verdict(512, culprit=7, stopped=None, missing=None)
    from parsers.model import Suspect

    verdict.suspects += [Suspect(r, None, None, ReasonClass.MISMATCH, "waits elsewhere", 0.6) for r in range(100, 140)]
    pm = PostMortem(verdict, source="synthetic")
    collapsed = collapse(pm.waitfor)
    nodes = [collapsed.nodes[k]["node"] for k in collapsed.nodes]
    assert len(nodes) <= 6
    assert any(n.culprit and n.ranks == [7] for n in nodes)
    assert any(len(n.ranks) == 40 and n.suspect for n in nodes)


def test_timeline_and_stack_tree_stay_small(big: PostMortem):
    rows, columns, by_seq = lanes(big.timeline_entries)
    assert len(rows) <= MAX_LANES and not by_seq
    assert sum(len(r.ranks) for r in rows) == 4096
    stations = dict(zip(columns, range(len(columns))))
    # program order from the stacks: the laggards' broadcast (line 140) before the culprit (150) before all_reduce (160)
    assert (stations["broadcast in sync_params (train.py:120)"] < stations["load_batch (data.py:88)"]
            < stations["all_reduce in train_step (train.py:60)"])
    assert len(_all(boxes(big.stack_tree))) <= 6


def test_small_jobs_keep_one_node_per_rank():
    pm = PostMortem(synthetic_verdict(8, culprit=5, stopped=None, missing=None), source="synthetic")
    collapsed = collapse(pm.waitfor)
    assert collapsed.number_of_nodes() == 8
    assert collapsed.in_degree(("rank", 5)) == 7


# --- real stacks: `forensics demo --native --ranks 5 --culprit 1` (py-spy --native), analyze --json ---

def _real_native_verdict():
    import json
    from pathlib import Path

    from parsers.model import Suspect, Verdict

    data = json.loads((Path(__file__).resolve().parents[2] / "fixtures" / "report" / "native_demo_verdict.json")
                      .read_text())
    suspects = [Suspect(**{k: s[k] for k in ("rank", "host", "pid", "reason", "confidence", "evidence")},
                        reason_class=ReasonClass(s["reason_class"])) for s in data["suspects"]]
    return Verdict(suspects=suspects, summary=data["summary"], sections=data["sections"])


def test_unresolved_native_frames_merge_and_order_holds():
    """py-spy --native names the outermost libc frame by its address, which differs per process (ASLR)."""
    from forensics.report.postmortem.timeline import merged_tree

    pm = PostMortem(_real_native_verdict(), source="native demo")
    assert len(pm.stack_tree["children"]) == 5  # as analysed: one branch per rank
    merged = merged_tree(pm.stack_tree)
    assert [c["frame"] for c in merged["children"]] == ["?? [libc.so.6]"]
    tops = boxes(merged)
    assert len(tops) == 1 and [b.ranks for b in tops[0].children] == [[0, 2, 3, 4], [1]]
    order = {e.rank: e.order for e in pm.timeline_entries}
    assert order[1] < order[0] == order[2] == order[3] == order[4]  # main:68 (data loader) before main:79


def test_boxes_keep_the_users_frames_when_cut():
    from forensics.report.stacktree import MAX_FRAMES_PER_BOX

    pm = PostMortem(_real_native_verdict(), source="native demo")
    waiters = boxes(pm.merged_stack_tree)[0].children[0]
    lines = waiters.lines
    assert len(lines) <= MAX_FRAMES_PER_BOX + 3  # header, frames, at most two '…' markers
    assert any("train_step (job.py:52)" in line for line in lines)
    assert any("c10d::Work::wait" in line for line in lines)
    assert any(line.startswith("… ") for line in lines)


def test_scattered_classes_and_external_rings_stay_drawable():
    """Every other rank waiting elsewhere folds to 2,048 ranges: the label is cut, not the picture."""
    import networkx as nx

    verdict = synthetic_verdict(4096, culprit=1, stopped=None, missing=None)
    for row in verdict.sections["ranks"]:
        if row["rank"] % 2 == 0:
            row["op"] = "broadcast"
    pm = PostMortem(verdict, source="synthetic")
    svg = to_svg(draw_waitfor(pm.waitfor))
    assert "CULPRIT rank 1" in svg and len(svg) < 200_000
    ring = nx.DiGraph([(r, (r + 1) % 64) for r in range(64)])  # a wait-for cycle from some correlation
    collapsed = collapse(ring)
    assert collapsed.number_of_nodes() == 1
    node = collapsed.nodes[next(iter(collapsed.nodes))]["node"]
    assert len(node.ranks) == 64 and collapsed.number_of_edges() == 1  # one self-loop carrying 64 edges
    assert "64 inside" in to_svg(draw_waitfor(ring))
