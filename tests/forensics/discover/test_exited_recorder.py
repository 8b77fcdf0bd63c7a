"""An exited rank's number from its own NCCL recorder file (forensics.discover.exited), on real state files.

tests/fixtures/recorder/sigstop8 holds the recorder files of a real 8-rank run (pids 473-480). The sibling
names the directory (FORENSICS_RECORDER_DIR); the dead process's own .bin file gives its RANK. The places
come from forensics.discover.recorder_files, the module the recorder collector uses too."""

from __future__ import annotations

import json

from forensics.collectors import recorder as recorder_collector
from forensics.discover import exited, recorder_files
from forensics.discover.rankenv import RankProcess
from hf_testpaths import FIXTURES

RUN = FIXTURES / "recorder" / "sigstop8"


def _sibling(pid: int) -> RankProcess:
    return RankProcess(pid=pid, host="vm", rank=0, local_rank=0, world_size=8, local_world_size=8, group_rank=0,
                       job_id="j", environ={recorder_files.DIR_KEY: str(RUN)})


def test_the_dead_rank_is_named_by_its_own_recorder_file():
    truth = json.loads((RUN / "truth.json").read_text())
    victim = truth["victim_pid"]
    assert exited._rank_from_recorder(victim, [_sibling(999_999_999)]) == truth["victim_rank"]


def test_no_file_of_that_pid_names_no_rank():
    assert exited._rank_from_recorder(12345678, [_sibling(999_999_999)]) is None


def test_the_collector_and_discovery_share_one_place_for_the_files():
    assert recorder_collector.state_files is recorder_files.state_files
    assert [p.name for p in recorder_files.state_files(RUN, 476)] == ["nccl-recorder.vm.476.0.bin"]
