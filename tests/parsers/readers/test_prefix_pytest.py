"""Wrappers added by issue 42: pytest's report (`E       ...`, `FAILED t.py::test - ...`) and host names kept as
posters leave them (a redacted tail '...-48', an IPv4 address).

Real lines: hpcaitech/ColossalAI#1320 (a pytest report of a spawned process's NCCL error), facebookresearch/
xformers#464 (a pytest summary line), Lightning-AI/lit-llama#380 (host redacted to '...-48').
"""

from __future__ import annotations

from pathlib import Path

from parsers.readers.prefix import short_host, strip_prefix
from parsers.readers import rank_log

CORPUS = Path(__file__).resolve().parents[2] / "fixtures" / "realworld"


def test_pytest_report_lines_are_read_as_the_lines_they_wrap():
    lines = (CORPUS / "colossalai-1320.log").read_text().splitlines()
    parsed = rank_log.parse_lines(lines, "colossalai-1320.log")
    kinds = [e.kind for e in parsed.events if hasattr(e, "kind")]
    assert "nccl-error" in kinds and "launcher-exit" in kinds
    nccl = next(e for e in parsed.events if getattr(e, "kind", "") == "nccl-error" and e.data.nccl_version)
    assert nccl.data.nccl_version == "2.10.3" and nccl.message.startswith("RuntimeError: NCCL error in:")


def test_the_e_prefix_keeps_the_lines_own_indentation_out():
    text, _ = strip_prefix('E         File "/home/lcfjr/codes/ColossalAI/tests/test_tensor/test_gpt2.py", line '
                           '105, in run_dist')
    assert text.startswith('File "')
    assert strip_prefix("E")[0] == ""


def test_a_pytest_summary_line_gives_its_exception():
    line = ("FAILED test_feedforward.py::test_moe[get_expert-4-top_2] - RuntimeError: Distributed package doesn't "
            "have NCCL built in")
    assert strip_prefix(line)[0].startswith("RuntimeError: Distributed package")


def test_glog_lines_and_words_are_not_pytest_lines():
    line = "E0207 07:54:31.862000 4712 torch/testing/_internal/common_distributed.py:939] Caught exception: "
    assert strip_prefix(line)[0] == line
    assert strip_prefix("Epoch 3 done")[0] == "Epoch 3 done"


def test_host_names_as_posters_leave_them():
    assert short_host("node1.cluster.local") == "node1"
    assert short_host("10.224.96.171") == "10.224.96.171"  # an address is no domain name
    assert short_host("...-48") == "...-48"  # a redacted tail: all that tells the host apart
    lines = (CORPUS / "lit-llama-380.log").read_text().splitlines()
    hosts = {e.origin.host for e in rank_log.parse_lines(lines, "l.log").events if getattr(e, "origin", None)}
    assert hosts == {"...-48"}
