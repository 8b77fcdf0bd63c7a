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

import pytest

from benchmarks.fleet_digest_tree import PER_HOST, make_answers
from benchmarks.fleet_fanout import STANDIN
from forensics.fleet import command as cmd
from forensics.fleet.collect import collect_fleet, new_tag, ssh_runner
from forensics.fleet.reduce import collect_reduced, read_fetch_index
from forensics.fleet.tree_verdict import tree_verdict
from parsers import knowledge
from forensics.report.words import analyze, worded

pytestmark = pytest.mark.integration  # real gateways over the stand-in ssh

HOSTS = 4


def _reduce(tmp_path, monkeypatch, culprit_host: int) -> tuple[list[str], dict[str, list[str]], dict]:
    """Answers of HOSTS hosts (host `culprit_host`'s local rank 3 stopped; -1: nobody), two gateways of two hosts
    each over the stand-in ssh, and the root's collect_reduced: (host names, gateways, its result)."""
    answers = tmp_path / "answers"
    make_answers(answers, HOSTS, culprit_host=culprit_host)
    monkeypatch.setenv("FORENSICS_STANDIN_LATENCY", "0.2")
    monkeypatch.setenv("FORENSICS_STANDIN_ANSWER", str(answers))
    names = [f"node{i:05d}" for i in range(HOSTS)]
    gateways = {"gw0": names[:2], "gw1": names[2:]}
    spec = cmd.RemoteSpec(python=sys.executable, tag=new_tag(), timeout=20)
    reduced = collect_reduced(gateways, tmp_path / "root", spec, str(tmp_path / "{gateway}"), host_timeout=60,
                              gateway_timeout=300, fanout=4, ssh_path=str(STANDIN), gateway_python=sys.executable,
                              gateway_ssh_path=str(STANDIN))
    return names, gateways, reduced


def test_reduced_tree_names_the_stopped_rank(tmp_path, monkeypatch):
    _names, _gateways, res = _reduce(tmp_path, monkeypatch, culprit_host=2)  # host 2's local rank 3: job rank 19
    answers = tmp_path / "answers"
    assert not res["refused"], res["refused"]
    assert res["hosts"] == HOSTS and res["ranks"] == HOSTS * PER_HOST
    assert res["classes"]["complete"] and res["odd_ranks"] == "19"
    # one merged digest a gateway came up, far smaller than the hosts' answers; the raw files stay on the gateways
    assert res["bytes_received"] < sum(p.stat().st_size for p in answers.iterdir()) / 10
    assert set(res["gateways"]) == {"gw0", "gw1"}
    assert all((Path(g["bundle"]) / "manifest.json").is_file() for g in res["gateways"].values())
    # each gateway's index of its hosts' ranks, beside its bundle: what its fetch reads instead of the manifest
    assert [len(read_fetch_index(Path(g["bundle"])) or []) for g in res["gateways"].values()] == [2, 2]
    merged = json.loads((tmp_path / "root" / "merged-digest.json").read_text())
    assert merged["flags"]["frozen"] == [[19, 19]]


def _verdict_facts(verdict) -> dict:
    """What an on-call engineer reads: who, which class of reason, the summary, every suspect, the hang decision."""
    return {"culprits": [(s.rank, str(s.reason_class)) for s in verdict.culprits], "summary": verdict.summary,
            "suspects": [(s.rank, s.host, str(s.reason_class), round(s.confidence, 2)) for s in verdict.suspects],
            "hang": verdict.hang, "hung_ranks": verdict.hung_ranks}


def test_the_tree_verdict_is_the_flat_verdict(tmp_path, monkeypatch):
    names, gateways, reduced = _reduce(tmp_path, monkeypatch, culprit_host=2)
    kb = knowledge.load(use_env=False)
    tree, info = tree_verdict(reduced, gateways, tmp_path / "root", str(tmp_path / "{gateway}"), timeout=120,
                              ssh_path=str(STANDIN), gateway_python=sys.executable, kb=kb)
    worded(tree.verdict)  # the tree returns the verdict typed, as parsers does; its words are the report's
    # only the stopped rank's host came back raw; the other 24 ranks stayed on the gateways, not missing
    assert info["hosts_fetched"] == ["node00002"] and not info["fetch_problems"], info
    assert info["ranks_on_gateways"] == (HOSTS - 1) * PER_HOST
    assert info["gateways_asked"] == ["gw1"] and 0 < info["bytes_fetched"]  # only the gateway that holds rank 19
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


def test_with_nobody_odd_one_rank_speaks_for_its_class_and_the_verdict_is_the_flat_one(tmp_path, monkeypatch):
    names, gateways, reduced = _reduce(tmp_path, monkeypatch, culprit_host=-1)  # every rank waits alike
    kb = knowledge.load(use_env=False)
    assert reduced["odd_ranks"] == "" and reduced["classes"]["complete"]
    tree, info = tree_verdict(reduced, gateways, tmp_path / "root", str(tmp_path / "{gateway}"), timeout=120,
                              ssh_path=str(STANDIN), gateway_python=sys.executable, kb=kb)
    worded(tree.verdict)  # the tree returns the verdict typed, as parsers does; its words are the report's
    assert info["hosts_fetched"] == ["node00000"] and info["ranks_asked"] == "0"
    spec = cmd.RemoteSpec(python=sys.executable, tag=new_tag(), timeout=20)
    collect_fleet(names, tmp_path / "flat", spec, ssh_runner([], 4, ssh_path=str(STANDIN)), host_timeout=60, quiet=True)
    flat = analyze(tmp_path / "flat", kb).verdict
    assert flat.culprit is None and _verdict_facts(tree.verdict) == _verdict_facts(flat)


def test_collect_reduce_cli_prints_the_verdict(tmp_path):
    """`forensics collect --hosts --gateways --reduce` as a user runs it: progress on stderr, the VERDICT block
    (or --json) on stdout, exit 0 when every host answered; stand-in ssh for the root's and the gateways' ssh."""
    import os
    import subprocess

    answers = tmp_path / "answers"
    make_answers(answers, HOSTS, culprit_host=1)  # host 1's local rank 3: job rank 11
    env = dict(os.environ, FORENSICS_STANDIN_LATENCY="0.2", FORENSICS_STANDIN_ANSWER=str(answers),
               PYTHONPATH=os.pathsep.join([str(Path(__file__).resolve().parents[3]), os.environ.get("PYTHONPATH", "")]))
    base = [sys.executable, "-m", "forensics", "collect", "--hosts", f"node[00000-{HOSTS - 1:05d}]", "--gateways",
            "gw[0-1]", "--reduce", "--ssh-path", str(STANDIN), "--remote-python", sys.executable, "--fanout", "4"]
    done = subprocess.run([*base, "-v", "-o", str(tmp_path / "root"), "--gateway-out", str(tmp_path / "gws")],
                          capture_output=True, text=True, env=env, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    assert "VERDICT: rank 11 (node00001" in done.stdout and "is stopped" in done.stdout, done.stdout
    # wording is the behaviour: the reduced tree's text output (what fetched, from where)
    assert "odd ones out: 11; raw files fetched from 1 host(s) (node00001)" in done.stdout
    # wording is the behaviour: the merged digest's lines as printed
    assert "[0-31] (32)" in done.stdout and "flagged frozen on their host: [11]" in done.stdout  # the merged digest
    # wording is the behaviour: the progress lines on stderr
    assert "gw0: answered" in done.stderr and "fetching the raw files of ranks 11" in done.stderr
    # '/{gateway}' added: one folder each, and beside it the gateway's index of its hosts' ranks (for the fetch)
    assert sorted(p.name for p in (tmp_path / "gws").iterdir()) == ["gw0", "gw0.fetch-index.json", "gw1",
                                                                    "gw1.fetch-index.json"]
    again = [*base, "--json", "--tar", "-o", str(tmp_path / "root2"), "--gateway-out", str(tmp_path / "gws")]
    done = subprocess.run(again, capture_output=True, text=True, env=env, timeout=300)
    assert done.returncode == 6 and json.loads(done.stdout)["hosts"] == 0  # a gateway never files over a bundle
    again[-4:] = ["-o", str(tmp_path / "root3"), "--gateway-out", str(tmp_path / "gws2" / "{gateway}")]
    done = subprocess.run(again, capture_output=True, text=True, env=env, timeout=300)
    doc = json.loads(done.stdout)
    assert done.returncode == doc["exit_code"] == 0 and doc["mode"] == "reduced" and doc["ranks"] == HOSTS * PER_HOST
    assert doc["archive"] and Path(doc["archive"]).is_file()
    assert doc["fetched"]["hosts_fetched"] == ["node00001"] and doc["verdict"]["culprit"]["rank"] == 11, doc["verdict"]
    bad = subprocess.run([*base[:6], "--reduce", "-o", str(tmp_path / "root4")], capture_output=True, text=True,
                         env=env,
                         timeout=120)
    assert bad.returncode == 2 and "--reduce and --gateways go together" in bad.stderr
    helped = subprocess.run([sys.executable, "-m", "forensics", "collect", "--help"], capture_output=True, text=True,
                            env=env, timeout=120)
    assert "--reduce" in helped.stdout and "--fetch-max" in helped.stdout
