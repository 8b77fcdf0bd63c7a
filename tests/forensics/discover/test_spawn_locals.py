"""Rank recovery from py-spy --locals JSON, on a real py-spy dump of a real mp.spawn child."""

import subprocess
import sys
import time

import pytest

from forensics.collect.targets import recover_ranks
from forensics.collect.tool import find_tool
from forensics.discover.spawned import find_spawned, rank_from_pyspy


def test_hostile_shapes_give_none():
    assert rank_from_pyspy(None) is None and rank_from_pyspy({"a": 1}) is None
    assert rank_from_pyspy([{"frames": [{"name": "_wrap", "filename": "torch/multiprocessing/spawn.py",
                                         "locals": [{"name": "i", "repr": "not-a-number"}]}]}]) is None
    assert rank_from_pyspy([{"frames": "x"}, 5, {"frames": [5, {"locals": "y"}]}]) is None


@pytest.mark.integration
def test_real_spawn_children_are_found_and_ranked(tmp_path):
    if not find_tool("py-spy"):
        pytest.skip("py-spy missing")
    script = tmp_path / "sp.py"
    script.write_text("import os, time, torch.multiprocessing as mp\n"
                      "def fn(i, d):\n    open(f'{d}/r{i}', 'w').write(str(os.getpid())); time.sleep(60)\n"
                      "if __name__ == '__main__':\n    mp.spawn(fn, args=(%r,), nprocs=2)\n" % str(tmp_path))
    launcher = subprocess.Popen([sys.executable, str(script)], start_new_session=True)
    try:
        for _ in range(300):
            if all((tmp_path / f"r{i}").exists() and (tmp_path / f"r{i}").read_text() for i in (0, 1)):
                break
            time.sleep(0.1)
        pids = {i: int((tmp_path / f"r{i}").read_text()) for i in (0, 1)}
        found = [p for p in find_spawned("h", exclude=set()) if p.ppid == launcher.pid]
        assert {p.rank for p in found} == {None}  # discovery reads /proc only; the tool recovers the rank
        recover_ranks(found)
        assert {p.rank: p.pid for p in found} == pids
        assert {p.rank_source for p in found} == {"py-spy-locals"} and len({p.job_id for p in found}) == 1
    finally:
        import os
        import signal

        os.killpg(launcher.pid, signal.SIGKILL)
        launcher.wait()
