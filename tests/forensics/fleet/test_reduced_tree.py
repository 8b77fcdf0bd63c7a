"""The reduced tree end to end (issue 30): the root reaches two gateways through the stand-in ssh (which runs
each gateway's real `python -m forensics.fleet.reduce gateway` here, as sshd would there); each gateway
collects its hosts flat (real answers of 8 ranks a host, one rank stopped on one host) and answers one merged
digest; the root merges them and names the stopped rank as the one odd one out."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from benchmarks.fleet_digest_tree import PER_HOST, make_answers
from benchmarks.fleet_fanout import STANDIN
from forensics.fleet import command as cmd
from forensics.fleet.collect import new_tag
from forensics.fleet.reduce import collect_reduced

pytestmark = pytest.mark.integration  # real gateways over the stand-in ssh

HOSTS = 4


def test_reduced_tree_names_the_stopped_rank(tmp_path, monkeypatch):
    answers = tmp_path / "answers"
    make_answers(answers, HOSTS, culprit_host=2)  # host 2's local rank 3 is stopped: job rank 19
    monkeypatch.setenv("FORENSICS_STANDIN_LATENCY", "0.2")
    monkeypatch.setenv("FORENSICS_STANDIN_ANSWER", str(answers))
    names = [f"node{i:05d}" for i in range(HOSTS)]
    spec = cmd.RemoteSpec(python=sys.executable, tag=new_tag(), timeout=20)
    res = collect_reduced({"gw0": names[:2], "gw1": names[2:]}, tmp_path / "root", spec, str(tmp_path / "{gateway}"),
                          host_timeout=60, gateway_timeout=300, fanout=4, ssh_path=str(STANDIN),
                          gateway_python=sys.executable, gateway_ssh_path=str(STANDIN))
    assert not res["refused"], res["refused"]
    assert res["hosts"] == HOSTS and res["ranks"] == HOSTS * PER_HOST
    assert res["classes"]["complete"] and res["odd_ranks"] == "19"
    # one merged digest a gateway came up, far smaller than the hosts' answers; the raw files stay on the gateways
    assert res["bytes_received"] < sum(p.stat().st_size for p in answers.iterdir()) / 10
    assert set(res["gateways"]) == {"gw0", "gw1"}
    assert all((Path(g["bundle"]) / "manifest.json").is_file() for g in res["gateways"].values())
    merged = json.loads((tmp_path / "root" / "merged-digest.json").read_text())
    assert merged["flags"]["frozen"] == [[19, 19]]
