"""Many ranks of one host with the same fault give a host verdict; a victim's symptom on every rank does not
(issue 42 item 3).

Real lines: NVIDIA/nccl#230 (three processes of one container, 'Call to ibv_get_async_event failed'),
NVIDIA/nccl#394 (two processes of VM-0-14-centos with 'GID table change', two others with completion errors),
NVIDIA/nccl-tests#252 (every process of kolyoz1 and kolyoz2 told a connection closed), aws/aws-k8s-tester#524
(two hosts of two ranks each), NVIDIA/nccl#795 (a process's 'Connection closed by remote peer'). A job of two
hosts is made by putting one excerpt's host beside another excerpt's: each line stays as posted.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from forensics.report.words import analyze
from parsers import knowledge
from parsers.gather.evidence import load_directory
from parsers.judges import hosts
from parsers.judges.same_fault import SAME_FAULT, normalise, same_fault_findings
from parsers.model.manifest import RankRecord

CORPUS = Path(__file__).resolve().parents[2] / "fixtures" / "realworld"
KB = knowledge.load(use_env=False)


def _lines(stem: str, host: str | None = None) -> list[str]:
    """The excerpt's lines, or those of one host only (its name in the line's NCCL prefix)."""
    text = (CORPUS / f"{stem}.log").read_text().splitlines()
    return [line for line in text if host is None or f"{host}:" in line]


def _job(tmp_path: Path, *parts: list[str]) -> Path:
    (tmp_path / "job.log").write_text("\n".join(line for part in parts for line in part) + "\n")
    return tmp_path


def _same_fault(folder: Path) -> dict[str, list]:
    ev = load_directory(folder)
    judged = frozenset((f.source, f.line_no) for fs in hosts.rank_log_findings(ev, KB).values() for f in fs)
    return same_fault_findings(ev.artifacts, hosts.RANK_LOG_KINDS, judged)


NCCL230 = "container-e275-1553839402050-12124-01-000057"


@pytest.mark.parametrize("sick, healthy", [
    (("nccl-230", NCCL230, 3), ("aws-k8s-tester-524", "bert-training-worker-3")),
    (("nccl-230", NCCL230, 3), ("nccl-tests-252", "kolyoz1")),
])
def test_every_rank_of_one_host_with_one_unknown_error_makes_it_a_suspect(tmp_path, sick, healthy):
    stem, host, ranks = sick
    folder = _job(tmp_path, _lines(stem, host), _lines(*healthy))
    found = _same_fault(folder)
    assert list(found) == [host]
    evidence = found[host][0].evidence
    assert f"{ranks} of {ranks} ranks of {host}" in evidence and "ibv_get_async_event" in evidence
    assert evidence.count("job.log:") == ranks  # each rank's own line is cited
    reports = {r.host: r for r in hosts.host_reports(load_directory(folder), KB)}
    assert reports[host].status in ("suspect",
                                    "exclude") and SAME_FAULT.id in {g.entry.id for g in reports[host].reasons}
    other = reports.get(healthy[1])
    assert other is None or SAME_FAULT.id not in {g.entry.id for g in other.groups}


def test_gid_change_on_two_ranks_of_one_host_and_another_host_quiet(tmp_path):
    # nccl#394's two processes that got the GID change, without the two that got completion errors
    gid = [line for line in _lines("nccl-394") if "GID table change" in line]
    folder = _job(tmp_path, gid, _lines("aws-k8s-tester-524", "bert-training-worker-2"))
    assert list(_same_fault(folder)) == ["VM-0-14-centos"]


def test_a_rank_of_the_host_without_the_error_keeps_it_off(tmp_path):
    # the real excerpt: two of VM-0-14-centos's four processes report the GID change, two do not
    folder = _job(tmp_path, _lines("nccl-394"), _lines("aws-k8s-tester-524", "bert-training-worker-2"))
    assert _same_fault(folder) == {}


def test_the_same_error_on_another_host_keeps_both_off(tmp_path):
    other = [line.replace("VM-0-14-centos", "VM-0-15-centos") for line in _lines("nccl-394") if "GID" in line]
    gid = [line for line in _lines("nccl-394") if "GID table change" in line]
    assert _same_fault(_job(tmp_path, gid, other)) == {}


@pytest.mark.parametrize("stem", ["nccl-230", "nccl-394", "nccl-tests-252", "aws-k8s-tester-524", "lit-llama-380"])
def test_no_verdict_of_the_rule_on_the_real_excerpts_as_posted(tmp_path, stem):
    # one host (nothing to compare with), or victims' symptoms on every rank (nccl-tests#252's closed connections)
    assert _same_fault(_job(tmp_path, _lines(stem))) == {}


def test_connection_closed_by_peer_on_every_rank_of_a_healthy_host_is_no_fault(tmp_path):
    # nccl#795's line on two processes of one host, while a rank of another host died (nccl-tests#252's IB error)
    closed = [line for line in _lines("nccl-795") if "Connection closed by remote peer" in line]
    both = closed + [closed[0].replace(":183006:", ":183007:").replace("[1]", "[2]")]
    folder = _job(tmp_path, both, _lines("nccl-tests-252", "kolyoz2"))
    assert _same_fault(folder) == {}
    reports = hosts.host_reports(load_directory(folder), KB)
    assert all(SAME_FAULT.id not in {g.entry.id for g in r.groups} for r in reports)
    assert "a100-st-p4d24xlarge-22" not in {r.host for r in reports if r.status in ("suspect", "exclude")}


def test_the_verdict_reaches_analyze(tmp_path):
    folder = _job(tmp_path, _lines("nccl-230", NCCL230), _lines("nccl-tests-252", "kolyoz1"))
    result = analyze(folder, KB)
    bad = {h.host for h in result.hosts if h.status in ("suspect", "exclude")}
    assert NCCL230 in bad and "kolyoz1" not in bad


def test_normalise_cuts_what_differs_between_ranks():
    a = normalise("node7", "node7: Call to ibv_get_async_event failed on mlx5_0 port 1 at 0x7f12")
    b = normalise("node7", "node7: Call to ibv_get_async_event failed on mlx5_3 port 2 at 0x7f99")
    assert a == b and "node7" not in a


def test_a_rank_of_the_host_that_wrote_no_line_keeps_it_off(tmp_path):
    # a bundle's process record of a fourth rank on the host: its silence is no proof it had the error
    folder = _job(tmp_path, _lines("nccl-230", NCCL230), _lines("nccl-tests-252", "kolyoz1"))
    ev = load_directory(folder)
    judged = frozenset((f.source, f.line_no) for fs in hosts.rank_log_findings(ev, KB).values() for f in fs)
    assert list(same_fault_findings(ev.artifacts, hosts.RANK_LOG_KINDS, judged)) == [NCCL230]
    silent = RankRecord(host=NCCL230, pid=999, dir="", rank=None)
    assert same_fault_findings(ev.artifacts, hosts.RANK_LOG_KINDS, judged, [silent]) == {}
