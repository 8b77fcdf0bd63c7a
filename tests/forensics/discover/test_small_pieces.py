"""Pure functions of the foundation: redaction, NCCL_DEBUG_FILE expansion, rank folding, /proc parsing."""

from __future__ import annotations

from forensics.collectors.environment import REDACTED, redact
from forensics.collectors.nccl_logs import expand_debug_file
from forensics.discover.procfs import parse_stat
from forensics.discover.ranks import RankProcess, expected_missing, job_id_of
from parsers.model.ranges import fold


def test_redact_hides_secrets_keeps_config():
    env = {
        "HF_TOKEN": "hf_abc",
        "AWS_SECRET_ACCESS_KEY": "x",
        "WANDB_API_KEY": "k",
        "DB_PASSWORD": "p",
        "NCCL_DEBUG": "INFO",
        "PWD": "/home/u",
        "PROXY": "http://user:hunter2@proxy:3128",
    }
    clean = redact(env)
    assert (clean["HF_TOKEN"] == clean["AWS_SECRET_ACCESS_KEY"] == clean["WANDB_API_KEY"] == clean["DB_PASSWORD"]
            == REDACTED)
    assert clean["NCCL_DEBUG"] == "INFO" and clean["PWD"] == "/home/u"
    assert "hunter2" not in clean["PROXY"] and "proxy:3128" in clean["PROXY"]


def test_expand_debug_file():
    assert expand_debug_file("/logs/nccl.%h.%p.log", 42, "node7.cluster.local") == "/logs/nccl.node7.42.log"
    assert expand_debug_file("a%%b%x", 1, "h") == "a%b%x"


def test_parse_stat_with_odd_comm():
    comm, state, ppid, start = parse_stat("123 (py thon) (x)) S 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 999 20")
    assert (comm, state, ppid, start) == ("py thon) (x)", "S", 1, 999)


def test_fold():
    assert fold([0, 1, 2, 3, 5, 7, 8]) == "0-3,5,7-8"
    assert fold([4]) == "4" and fold([]) == "none"


def _proc(rank, **kw):
    base = dict(pid=100 + rank, host="h", rank=rank, local_rank=rank, world_size=4, local_world_size=4, group_rank=0,
                job_id="j")
    base.update(kw)
    return RankProcess(**base)


def test_expected_missing_single_host():
    missing = expected_missing([_proc(0), _proc(1), _proc(3)])
    assert [m.rank for m in missing] == [2]


def test_expected_missing_multi_host_claims_only_own_ranks():
    procs = [_proc(r, world_size=8, local_world_size=4, group_rank=1) for r in (4, 5, 7)]
    assert [m.rank for m in expected_missing(procs)] == [6]


def test_expected_missing_without_layout_claims_nothing():
    procs = [_proc(0, local_world_size=None, group_rank=None, world_size=16)]
    assert expected_missing(procs) == []


def test_job_id():
    assert job_id_of({"TORCHELASTIC_RUN_ID": "abc", "MASTER_ADDR": "x"}) == "abc"
    assert job_id_of({"MASTER_ADDR": "10.0.0.1", "MASTER_PORT": "29500"}) == "10.0.0.1:29500"
    assert job_id_of({}) is None


def test_nccl_log_found_when_rank_has_its_own_hostname(tmp_path):
    """A rank in a container writes nccl.<its hostname>.<pid>.log, not ours (seen on the device)."""
    import os

    from forensics.collectors.nccl_logs import find_debug_file

    pid = os.getpid()
    log = tmp_path / f"nccl.node03.{pid}.log"
    log.write_text("x\n")
    assert find_debug_file(str(tmp_path / "nccl.%h.%p.log"), pid) == log
    assert find_debug_file(str(tmp_path / "nccl.%h.%p.other"), pid) is None
