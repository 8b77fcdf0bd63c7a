"""The reduced tree end to end (issue 30): the root reaches two gateways through the stand-in ssh (which runs
each gateway's real `python -m forensics.fleet.reduce gateway` here, as sshd would there); each gateway
collects its hosts flat (real answers of 8 ranks a host, one rank stopped on one host) and answers one merged
digest; the root merges them and names the stopped rank as the one odd one out. Then the root fetches from the
gateways the raw files of only that rank's host, and the judges' verdict over them and the merged digest is the
one a flat collect + analyze of the same hosts gives."""

from __future__ import annotations

import json
import sys
from pathlib import Path

from benchmarks.fleet_digest_tree import PER_HOST, make_answers
from benchmarks.fleet_fanout import STANDIN
from forensics.fleet import command as cmd
from forensics.fleet.collect import collect_fleet, new_tag, ssh_runner
from forensics.fleet.reduce import collect_reduced, tree_verdict
from parsers import knowledge
from parsers.analyze import analyze

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


def _verdict_facts(verdict) -> dict:
    """What an on-call engineer reads first: who, which class of reason, the summary, and the hang decision."""
    return {"culprits": [(s.rank, str(s.reason_class)) for s in verdict.culprits], "summary": verdict.summary,
            "hang": verdict.hang, "hung_ranks": verdict.hung_ranks}


def test_the_tree_verdict_is_the_flat_verdict(tmp_path, monkeypatch):
    answers = tmp_path / "answers"
    make_answers(answers, HOSTS, culprit_host=2)
    monkeypatch.setenv("FORENSICS_STANDIN_LATENCY", "0.2")
    monkeypatch.setenv("FORENSICS_STANDIN_ANSWER", str(answers))
    names = [f"node{i:05d}" for i in range(HOSTS)]
    kb = knowledge.load(use_env=False)
    gateways = {"gw0": names[:2], "gw1": names[2:]}
    spec = cmd.RemoteSpec(python=sys.executable, tag=new_tag(), timeout=20)
    reduced = collect_reduced(gateways, tmp_path / "root", spec, str(tmp_path / "{gateway}"), host_timeout=60,
                              gateway_timeout=300, fanout=4, ssh_path=str(STANDIN), gateway_python=sys.executable,
                              gateway_ssh_path=str(STANDIN))
    tree, info = tree_verdict(reduced, gateways, tmp_path / "root", str(tmp_path / "{gateway}"), timeout=120,
                              ssh_path=str(STANDIN), gateway_python=sys.executable, kb=kb)
    # only the stopped rank's host came back raw; the other 24 ranks stayed on the gateways, not missing
    assert info["hosts_fetched"] == ["node00002"] and not info["fetch_problems"], info
    assert info["ranks_on_gateways"] == (HOSTS - 1) * PER_HOST
    assert sorted(p.name for p in (tmp_path / "root" / "hosts").iterdir()) == ["node00002"]
    culprit = tree.verdict.culprit
    assert culprit is not None and culprit.rank == 19 and culprit.host == "node00002", tree.verdict.summary
    assert "stopped" in (culprit.reason + tree.verdict.summary).lower(), culprit.reason

    spec = cmd.RemoteSpec(python=sys.executable, tag=new_tag(), timeout=20)
    flat = collect_fleet(names, tmp_path / "flat", spec, ssh_runner([], 4, ssh_path=str(STANDIN)), host_timeout=60,
                         quiet=True)
    assert len(flat.answered) == HOSTS  # (not "complete": py-spy cannot read the stopped rank)
    flat_facts = _verdict_facts(analyze(tmp_path / "flat", kb).verdict)
    coverage = tree.verdict.sections["coverage"]
    assert coverage["ranks_reporting"] == HOSTS * PER_HOST and coverage["ranks_read_raw"] == PER_HOST
    assert coverage["text"].startswith(f"complete: {HOSTS * PER_HOST} of {HOSTS * PER_HOST} ranks"), coverage
    assert _verdict_facts(tree.verdict) == flat_facts
    assert _verdict_facts(analyze(tmp_path / "flat", kb, digests=False).verdict) == flat_facts  # and a full read
