"""Evidence from failed runs and host checks; the simulator and its CLI."""

from __future__ import annotations

import json
import subprocess
import sys

from forensics.bisect import from_bundles, simulate
from forensics.cli.main import main


def test_verdicts_and_bundles_are_tallied_and_garbage_is_reported(tmp_path):
    (tmp_path / "v1.json").write_text(json.dumps({"culprit": {"host": "n3", "rank": 5},
                                                  "suspects": [{"host": "n3", "confidence": 0.9},
                                                               {"host": "n7", "confidence": 0.3}]}))
    b1 = tmp_path / "bundle1"
    b1.mkdir()
    (b1 / "analysis.json").write_text(json.dumps({"culprit": {"host": "n3"}, "suspects": []}))
    b2 = tmp_path / "bundle2"
    b2.mkdir()
    (b2 / "manifest.json").write_text(json.dumps({"format": "hang-forensics-bundle", "hosts": [{"host": "n9"}]}))
    (tmp_path / "junk.json").write_text("not json")
    imp = from_bundles.read_bundles([tmp_path / "v1.json", b1, b2, tmp_path / "junk.json", tmp_path / "nope"])
    assert imp.counts == {"n3": 2, "n7": 1, "n9": 1}
    assert len(imp.problems) == 2
    assert from_bundles.repeat_suspects(imp, ["n3", "n7", "n9"]) == ["n3"]
    llr = from_bundles.prior_llr(imp, ["n3", "n7"])
    assert llr["n3"] > llr["n7"] > 0 and "n9" not in llr


def test_command_host_check_maps_exit_codes():
    script = "case $0 in bad*) exit 2;; sus*) exit 1;; odd*) exit 7;; esac; exit 0"
    check = from_bundles.command_check(f"sh -c '{script}' {{host}}", lambda argv, host: argv, timeout=10)
    got = from_bundles.run_checks(["bad1", "sus1", "ok1", "odd1"], check)
    assert got == {"bad1": "exclude", "sus1": "suspect", "ok1": "healthy"}


def test_simulator_is_reproducible_and_beats_the_hand_method_on_two_bad():
    model = simulate.ClusterModel(48, 2)
    a = simulate.simulate("grid", model, trials=10, seed=1)
    b = simulate.simulate("grid", model, trials=10, seed=1)
    assert [r.truth for r in a.results] == [r.truth for r in b.results]
    hand = simulate.simulate("hand", model, trials=10, seed=1)
    assert a.exact_rate == 1.0 and a.false_exclusions == 0
    assert hand.exact_rate < 1.0 and hand.rounds == 2


def test_simulated_one_bad_no_flake_takes_two_rounds_like_the_hand_method():
    s = simulate.simulate("grid", simulate.ClusterModel(48, 1), trials=10)
    assert s.rounds == 2 and s.exact_rate == 1.0


def test_information_bound():
    assert simulate.information_bound(48, 1) == __import__("math").log2(48)


def test_cli_simulate_json(capsys):
    rc = main(["bisect", "--hosts", "n[01-24]", "--simulate", "--sim-bad", "2", "--trials", "3", "--json"])
    assert rc == 0
    out = json.loads(capsys.readouterr().out)
    assert {d["design"] for d in out["designs"]} == {"hand", "grid", "grid3", "adaptive"}


def test_cli_bad_input_exits_2(capsys, tmp_path):
    assert main(["bisect", "--test", "true {hosts}"]) == 2
    assert main(["bisect", "--hosts", "a;b", "--test", "true"]) == 2
    assert main(["bisect", "--hosts", "n[1-4]"]) == 2
    bad = tmp_path / "s.json"
    bad.write_text("{}")
    assert main(["bisect", "--hosts", "n[1-4]", "--test", "true {hosts}", "--state", str(bad)]) == 2
    assert "not a bisect state" in capsys.readouterr().err


def test_cli_help_mentions_placeholders():
    out = subprocess.run([sys.executable, "-m", "forensics.cli.main", "bisect", "--help"],
                         capture_output=True, text=True).stdout
    assert "{hosts}" in out and "--from-bundles" in out and "--simulate" in out


def test_cli_with_shell_test_bundles_and_host_checks(tmp_path, capsys):
    """A real run with a fast shell test: fails whenever n05 or n11 is in the group."""
    test = "sh -c 'case \",$0,\" in *,n05,*|*,n11,*) exit 1;; esac; exit 0' {hosts}"
    (tmp_path / "v.json").write_text(json.dumps({"culprit": {"host": "n11"}, "suspects": []}))
    (tmp_path / "w.json").write_text(json.dumps({"culprit": {"host": "n11"}, "suspects": [{"host": "n02"}]}))
    check = "sh -c 'test $0 = n07 && exit 2; exit 0' {host}"
    rc = main(["bisect", "--hosts", "n[01-16]", "--test", test, "--state", str(tmp_path / "s.json"),
               "--from-bundles", str(tmp_path / "v.json"), str(tmp_path / "w.json"),
               "--host-check", check, "--flake-rate", "0.001", "--json", "--quiet", "--timeout", "20"])
    rep = json.loads(capsys.readouterr().out)
    assert rc == 5  # bad hosts found
    assert {e["unit"] for e in rep["bad"]} == {"n05", "n07", "n11"}
    assert set(rep["exclude_list"].split(",")) == {"n05", "n07", "n11"}
    assert [e for e in rep["bad"] if e["unit"] == "n07"][0]["excluded_by"] == ["host check"]
    first = rep["jobs"][0]
    assert first["round"] == 1 and first["hosts"][0] == "n11"  # implicated twice: tested alone first
    assert all("n07" not in j["hosts"] for j in rep["jobs"])  # excluded: never spent a job on


def test_cli_topology_together_convicts_a_whole_switch(tmp_path, capsys):
    topo = tmp_path / "topo.txt"
    topo.write_text("".join(f"n{i:02d} sw{(i - 1) // 2}\n" for i in range(1, 9)))
    test = "sh -c 'case \",$0,\" in *,n05,*) exit 1;; esac; exit 0' {hosts}"
    rc = main(["bisect", "--hosts", "n[01-08]", "--test", test, "--topology", str(topo), "--topology-mode",
               "together", "--state", str(tmp_path / "s.json"), "--flake-rate", "0.001", "--json", "--quiet"])
    rep = json.loads(capsys.readouterr().out)
    assert rc == 5
    assert [(e["unit"], e["hosts"]) for e in rep["bad"]] == [("sw2", ["n05", "n06"])]
    assert rep["exclude_list"] == "n05,n06"
    for job in rep["jobs"]:  # a switch is never split across jobs
        for sw in range(4):
            pair = {f"n{2 * sw + 1:02d}", f"n{2 * sw + 2:02d}"}
            assert len(pair & set(job["hosts"])) in (0, 2)


def test_cli_hosts_from_slurm_allocation_and_hostfile(tmp_path, monkeypatch, capsys):
    from forensics.cli.commands import bisect as cmd

    monkeypatch.setenv("SLURM_JOB_NODELIST", "gpu[1-3]")
    hf = tmp_path / "hosts"
    hf.write_text("# rack 1\nnode7\nnode[1-2]  extra words\n")
    args = cmd_args(["--slurm", "--hostfile", str(hf)])
    assert cmd._hosts(args) == ["node7", "node1", "node2", "gpu1", "gpu2", "gpu3"]
    hf.write_text("gpu1\n")
    assert main(["bisect", "--slurm", "--hostfile", str(hf), "--test", "true"]) == 2
    assert "listed twice" in capsys.readouterr().err


def cmd_args(argv):
    import argparse

    from forensics.cli.commands import bisect as cmd

    p = argparse.ArgumentParser()
    cmd.add_arguments(p)
    return p.parse_args(argv)


def test_cli_hand_design_is_the_intersection(tmp_path, capsys):
    test = "sh -c 'case \",$0,\" in *,n01,*|*,n06,*) exit 1;; esac; exit 0' {hosts}"
    rc = main(["bisect", "--hosts", "n[01-08]", "--test", test, "--design", "hand",
               "--state", str(tmp_path / "s.json"), "--json", "--quiet"])
    rep = json.loads(capsys.readouterr().out)
    assert rc == 5 and rep["rounds"] == 2
    assert {e["unit"] for e in rep["bad"]} == {"n01", "n02", "n05", "n06"}  # two innocents convicted


def test_loose_folders_and_archives_are_read_through_the_one_pipeline(tmp_path):
    """Issue 12 item 3: a folder of a real job's loose files (NCCL 2.28.9 sleep scenario, culprit rank 5 on
    node05) and a tar archive of a real bundle implicate hosts like a saved verdict does."""
    import tarfile
    from pathlib import Path

    fix = Path(__file__).resolve().parents[2] / "fixtures" / "nccl"
    loose = tmp_path / "loose"
    loose.mkdir()
    for host in ("node00", "node05"):
        (loose / host).mkdir()
        for p in (fix / "sleep" / host).iterdir():
            (loose / host / p.name).write_bytes(p.read_bytes())
    archive = tmp_path / "bundle.tar.gz"
    with tarfile.open(archive, "w:gz") as tar:
        tar.add(fix / "sigstop" / "bundle", arcname="bundle")
    hosts, problem = from_bundles.read_one(loose)
    assert problem is None and "node05" in hosts
    hosts, problem = from_bundles.read_one(archive)
    assert problem is None and "vm" in hosts  # the bundle's host (8 fake hosts collected on one machine)
