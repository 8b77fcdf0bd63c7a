"""Launch lines that state the job's size, and mpirun's report of the rank that died (issue 42 items 1 and 6).

Real lines: Lightning (mittagessen/party#7), Accelerate (ServiceNow/TapeAgents#104), DeepSpeed's WORLD INFO DICT
(huggingface/transformers#22363), torchrun's command (pytorch/pytorch#88000), mpirun's 'noticed' lines
(NVIDIA/nccl-tests#218, InternLM/lmdeploy#1221, Kay1794/Aware-of-the-history#2 with PID and node redacted,
horovod/horovod#469 with 'PID 0 on node HOSTNAME', open-mpi/ompi#2661, adda-team/adda#151 wrapped).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from parsers.gather.evidence import load_directory
from parsers.model.events import Origin
from parsers.readers import launcher, rank_log

CORPUS = Path(__file__).resolve().parents[2] / "fixtures" / "realworld"


def _line(stem: str, needle: str) -> str:
    return next(ln for ln in (CORPUS / f"{stem}.log").read_text().splitlines() if needle in ln)


@pytest.mark.parametrize("stem, needle, size, who", [
    ("party-7", "Starting with", 4, "lightning"),
    ("tapeagents-104", "Num processes", 2, "accelerate"),
    ("transformers-22363", "WORLD INFO DICT", 2, "deepspeed"),
    ("pytorch-88000", "--nproc_per_node", 2, "torchrun"),
])
def test_the_size_a_launch_line_states(stem, needle, size, who):
    [event] = launcher.match_line(_line(stem, needle), Origin())
    assert (event.kind, event.data.world_size, event.data.launcher) == (launcher.SIZE_KIND, size, who)


@pytest.mark.parametrize("rank", [0, 1, 2, 3])
def test_lightning_members_say_their_rank_and_the_size(rank):
    line = _line("party-7", f"GLOBAL_RANK: {rank},")
    [event] = launcher.match_line(line, Origin())
    assert event.kind == "rank-identity" and event.data.rank == rank and event.data.world_size == 4


def test_the_stated_size_reaches_the_evidence(tmp_path):
    (tmp_path / "party.log").write_text((CORPUS / "party-7.log").read_text())
    assert load_directory(tmp_path).coverage.world_size == 4


@pytest.mark.parametrize("stem, rank, pid, host, signal", [
    ("nccl-tests-218", 3, 1167, "10.10.21.2", 11),
    ("lmdeploy-1221", 1, 13580, "10.224.96.171", 4),
    ("aware-history-2", 1, None, None, 9),  # the poster redacted PID and node: unknown, never 'xxxxxxxx'
    ("horovod-469", 7, None, None, 9),  # 'PID 0 on node HOSTNAME': placeholders, no process and no host
    ("ompi-2661", 0, 21183, "host01", 9),
])
def test_mpirun_names_the_rank_that_died_and_its_node(stem, rank, pid, host, signal):
    [event] = launcher.match_line(_line(stem, "noticed that process rank"), Origin())
    assert (event.kind, event.origin.rank, event.origin.pid, event.origin.host) == ("launcher-exit", rank, pid, host)
    assert event.data.signal == signal and event.message.startswith("mpirun noticed")


def test_mpiexec_report_hard_wrapped_before_its_signal():
    """adda-team/adda#151: the exporter wrapped mpiexec's line after 'exited on '; the rank, pid, node and signal
    are read across the wrap."""
    parsed = rank_log.parse_lines((CORPUS / "adda-151.log").read_text().splitlines(), "adda-151.log")
    [event] = [e for e in parsed.events if getattr(e, "kind", "") == "launcher-exit"]
    assert (event.origin.rank, event.origin.pid, event.origin.host) == (0, 10313, "proton")
    assert (event.data.launcher, event.data.signal) == ("mpiexec", 6)


def test_commands_without_a_size_give_none():
    assert launcher.match_line("mpirun --version", Origin()) == []
    assert launcher.match_line("the -n flag of mpi tools", Origin()) == []
