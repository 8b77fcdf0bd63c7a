"""Slurm's `srun: error: NODE: tasks LIST: ...` lines: which tasks of a step ended badly, on which node.

The lines are real (facebookresearch/ParlAI#3084, tests/fixtures/realworld/parlai-3084.log); the hostile
forms check that a task list cannot make the reader allocate without bound.
"""

from __future__ import annotations

from pathlib import Path

from parsers.model.events import Origin
from parsers.model.ranges import MAX_UNFOLD, unfold
from parsers.readers import launcher

LOG = Path(__file__).resolve().parents[2] / "fixtures" / "realworld" / "parlai-3084.log"


def test_srun_task_exits_name_node_tasks_and_code():
    lines = LOG.read_text().splitlines()
    got = [(ev.origin.host, ev.data.tasks, ev.data.exitcode, ev.origin.rank)
           for line in lines for ev in launcher.match_line(line, Origin(file="f"))]
    assert got == [("slurm-job-compute-0-0", [2, 3, 4, 5, 6, 7], 1, None),
                   ("slurm-job-compute-0-1", [8, 9, 10, 11, 12, 13, 15], 1, None),
                   ("slurm-job-compute-0-1", [14], 1, None)]  # task ids, never taken for global ranks


def test_srun_signal_ends_have_no_exit_code():
    [ev] = launcher.match_line("srun: error: gpu-07: task 3: Aborted (core dumped)", Origin())
    assert ev.data.how == "Aborted (core dumped)" and ev.data.exitcode is None and ev.origin.host == "gpu-07"


def test_hostile_task_lists_are_refused_not_expanded():
    assert unfold("0-999999999") is None
    assert unfold("5-2") is None and unfold("1,x") is None
    assert len(unfold(f"0-{MAX_UNFOLD - 1}")) == MAX_UNFOLD
    assert launcher.match_line("srun: error: n1: tasks 0-999999999: Exited with exit code 1", Origin()) == []
