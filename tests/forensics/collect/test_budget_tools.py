"""Stack-tool output is inside the budget (issue 40 item 6): threads and frames capped per rank, the text counted
against the rank's and the collection's bytes, what was cut said. Input built here: 1,000 threads of 300 frames."""

from __future__ import annotations

import json

from forensics.collect.budget import TOOL_FRAMES, TOOL_THREADS, ByteBudget, cap_threads
from forensics.collectors.pyspy import _save


class _Target:
    def __init__(self, root, budget):
        self.pid, self.root, self.budget = 4242, root, budget

    def out(self, name):
        return self.root / name, name


def _threads(n: int, frames: int) -> list:
    return [{"thread_id": t, "thread_name": f"t{t}", "frames": [{"name": f"f{i}", "filename": "x.py", "line": i}
                                                                for i in range(frames)]} for t in range(n)]


def test_a_rank_of_1000_threads_of_300_frames_is_capped_and_the_cut_said(tmp_path):
    kept, cut = cap_threads(_threads(1000, 300))
    assert len(kept) == TOOL_THREADS and all(len(t["frames"]) == TOOL_FRAMES for t in kept)
    assert cut.startswith("744 of 1000 threads") and f"at most {TOOL_FRAMES}" in cut
    parent = ByteBudget(1 << 30, "collection")
    rec = _save("py-spy", _Target(tmp_path, ByteBudget(512 << 20, "rank", parent)), _threads(1000, 300), {})
    size = (tmp_path / rec.files[0]).stat().st_size
    assert rec.status == "ok" and size < 20 << 20 and parent.used == size
    assert rec.details["cut"] == cut and any("threads left out" in c for c in parent.cuts)
    assert len(json.loads((tmp_path / rec.files[0]).read_text())) == TOOL_THREADS


def test_tool_output_past_the_budget_is_not_written_and_said(tmp_path):
    parent = ByteBudget(1000, "collection")
    rec = _save("py-spy", _Target(tmp_path, ByteBudget(512 << 20, "rank", parent)), _threads(4, 50), {})
    assert rec.status == "skipped" and not rec.files and "collection cap" in rec.error
    assert parent.used == 0 and not list(tmp_path.iterdir())


def test_nothing_is_cut_from_a_real_sized_rank():
    kept, cut = cap_threads(_threads(40, 120))
    assert cut is None and len(kept) == 40


def test_a_cut_by_a_tool_cap_is_said_with_the_byte_cuts():
    parent = ByteBudget(1 << 30, "collection")
    rank = ByteBudget(512 << 20, "rank", parent)
    rank.note("pid 1 gdb.json: 744 of 1000 threads left out")
    rank.cut("pid 1 pyspy.json", 100, 0)
    assert len(parent.cuts) == 2 and parent.cuts[0].startswith("pid 1 gdb.json")
