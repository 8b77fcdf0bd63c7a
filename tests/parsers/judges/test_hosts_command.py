"""`forensics hosts` and the analyze hook, on bundles from real collectors and real fixture files."""

from __future__ import annotations

import json

import pytest

from parsers.model.manifest import CollectorRecord, HostRecord
from parsers.model.findings import ReasonClass
from forensics.bundle.writer import BundleWriter
from hostinfo_helpers import FIXTURES, REPO, collect_here, host_from_files, hosts_cli, rank_with_log
from parsers import knowledge
from parsers.gather.evidence import load_path
from parsers.judges.hosts import host_reports, host_suspects
from parsers.pipeline.merge import merge_suspects
from parsers.model import Suspect

pytestmark = pytest.mark.integration

WATCHDOG = ("[rank0]:[E1129 07:18:19.556497288 ProcessGroupNCCL.cpp:689] [Rank 0] Watchdog caught collective operation "
            "timeout: WorkNCCL(SeqNum=11, OpType=ALLREDUCE, NumelIn=1048576, NumelOut=1048576, Timeout(ms)=45000) "
            "ran for 45092 milliseconds before timing out.")
CUDA_OOM = ("torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 116.00 MiB. GPU 0 has a total capacity of "
            "22.05 GiB of which 112.12 MiB is free.")


@pytest.fixture(scope="module")
def healthy_bundle(tmp_path_factory):
    writer = BundleWriter(tmp_path_factory.mktemp("healthy") / "b")
    collect_here(writer, "here")
    writer.save()
    return writer.root


@pytest.fixture(scope="module")
def faulty_bundle(tmp_path_factory):
    """This machine for real, plus 'gpu-node-7' whose kernel log and nvidia-smi are real public outputs."""
    writer = BundleWriter(tmp_path_factory.mktemp("faulty") / "b")
    collect_here(writer, "here")
    host_from_files(writer, "gpu-node-7", {
        "kernel_log": ("kernel.log", FIXTURES / "kernel" / "public-gpu-faults.log"),
        "nvidia_smi": ("nvidia-smi-q.txt", FIXTURES / "nvsmi" / "a100-remap-pending.txt"),
    })
    rank_with_log(writer, "here", 0, 101, [WATCHDOG])
    rank_with_log(writer, "here", 2, 103, ["step 7", CUDA_OOM])
    rank_with_log(writer, "gpu-node-7", 1, 202, ["step 7"])
    writer.save()
    return writer.root


def test_healthy_machine_exits_0(healthy_bundle):
    out = hosts_cli(str(healthy_bundle), "--json")
    assert out.returncode == 0, out.stderr
    data = json.loads(out.stdout)
    assert data["overall"] == "healthy" and data["healthy"] == ["here"] and data["exclude_list"] == ""
    assert "kernel_log" in data["hosts"][0]["evidence_collected"]


def test_faulty_host_is_excluded_with_reasons_and_action(faulty_bundle):
    out = hosts_cli(str(faulty_bundle), "--json")
    assert out.returncode == 5, out.stderr  # hosts to act on (command-specific)
    data = json.loads(out.stdout)
    assert data["exclude"] == ["gpu-node-7"] and data["exclude_list"] == "gpu-node-7"
    node = next(h for h in data["hosts"] if h["host"] == "gpu-node-7")
    assert node["status"] == "exclude" and node["action"] == "exclude-host-and-restart"
    assert "hardware-ticket" in node["actions"]
    ids = {r["id"] for r in node["reasons"]}
    assert {"xid-79", "xid-48", "xid-119", "gpu-fallen-off-bus", "gpu-row-remap-pending", "sxid-fatal"} <= ids
    xid79 = next(r for r in node["reasons"] if r["id"] == "xid-79")
    assert xid79["count"] == 2 and xid79["source"].endswith("kernel.log") and xid79["line"]
    assert node["reasons"][0]["severity"] == "critical"  # worst first
    here = next(h for h in data["hosts"] if h["host"] == "here")
    assert here["status"] == "healthy"
    assert {f["id"] for f in here["other_findings"]} >= {"torch-watchdog-timeout", "cuda-oom"}


def test_text_output_names_the_hosts_to_exclude(faulty_bundle):
    out = hosts_cli(str(faulty_bundle))
    assert out.returncode == 5
    assert "gpu-node-7  exclude   exclude-host-and-restart" in out.stdout
    assert out.stdout.rstrip().endswith("exclude: gpu-node-7")


def test_host_without_usable_evidence_is_unknown_exit_3(tmp_path):
    writer = BundleWriter(tmp_path / "b")
    writer.add_host(HostRecord(host="dark",
                               collectors=[CollectorRecord("kernel_log", "denied", error="Operation not permitted"),
                                           CollectorRecord("nvidia_smi", "unavailable")]))
    writer.save()
    out = hosts_cli(str(writer.root), "--json")
    assert out.returncode == 3, out.stderr
    assert json.loads(out.stdout)["unknown"] == ["dark"]


def test_bad_inputs_exit_2(tmp_path, faulty_bundle):
    assert hosts_cli(str(tmp_path)).returncode == 2
    broken = tmp_path / "broken.toml"
    broken.write_text("[[entry]]\nid = 'x'\n")
    out = hosts_cli(str(faulty_bundle), "--kb", str(broken))
    assert out.returncode == 2 and "missing field(s)" in out.stderr


def test_user_knowledge_base_changes_the_verdict(tmp_path, healthy_bundle):
    """A site rule that treats the (real) cgroup OOM on this machine as a host problem."""
    site = tmp_path / "site.toml"
    site.write_text(
        (REPO / "parsers" / "knowledge" / "kernel.toml").read_text().split("[[entry]]")[0]
        + '[[entry]]\nid = "site-any-oom"\ntitle = "any OOM kill"\nkind = "line"\nstreams = ["kernel"]\n'
        + "pattern = 'Killed process'\nmeaning = \"site policy\"\nseverity = \"warning\"\naction = "
          "\"exclude-host-and-restart\"\nhost = \"suspect\"\n"
        + 'examples = ["Out of memory: Killed process 1 (x)"]\ncounter_examples = ["oom_reaper: reaped process 1 '
          '(x)"]\nexample_sources = ["site"]\n'
    )
    kernel_log = next(p for p in healthy_bundle.rglob("kernel.log"))
    has_oom = "Killed process" in kernel_log.read_text()
    out = hosts_cli(str(healthy_bundle), "--json", "--kb", str(site))
    data = json.loads(out.stdout)
    assert (data["overall"], out.returncode) == (("suspect", 5) if has_oom else ("healthy", 0))


def test_host_suspects_outrank_a_stopped_rank_and_carry_the_action(faulty_bundle):
    ev = load_path(faulty_bundle)
    reports = host_reports(ev, knowledge.load(use_env=False))
    suspects = host_suspects(reports, ev.ranks)
    by_rank = {s.rank: s for s in suspects}
    assert set(by_rank) == {1, 2}  # rank 0 only waited (watchdog timeout): not a suspect
    host_fault = by_rank[1]
    assert host_fault.reason_class == "host-fault" and host_fault.host == "gpu-node-7"
    assert host_fault.confidence > 0.95
    # verbatim input: the knowledge base's action text (data), cited as the suspect's evidence
    actions = ("recommended action: exclude (drain) the host", "recommended action: open a hardware ticket")
    assert any(e.startswith(actions) for e in host_fault.evidence)
    own = by_rank[2]
    # verbatim input: the log's own error message
    assert own.reason_class == "known-error" and "cuda out of memory" in own.reason.lower()
    # verbatim input: the knowledge base's action text (data), cited as the suspect's evidence
    assert "recommended action: fix the code or the job's configuration" in own.evidence
    stopped = Suspect(rank=3, host="here", pid=104, reason_class=ReasonClass.STOPPED, reason="is stopped",
                      confidence=0.95)
    waiting_mismatch = Suspect(rank=1, host="gpu-node-7", pid=202, reason_class=ReasonClass.MISMATCH,
                               reason="waits elsewhere", confidence=0.6)
    merged = merge_suspects([stopped, waiting_mismatch], suspects)
    assert [s.rank for s in merged] == [1, 3, 2]
    assert [a.reason_class for a in merged[0].agreeing] == ["mismatch"]  # typed, not an evidence line


def test_the_merged_verdict_puts_the_host_fault_first_with_its_action(faulty_bundle):
    from forensics.report.words import analyze

    verdict = analyze(faulty_bundle, knowledge.load(use_env=False)).verdict
    assert verdict.culprit.rank == 1 and verdict.culprit.reason_class == "host-fault"
    assert "Recommended action:" in verdict.summary
    assert verdict.sections["exclude_hosts"] == ["gpu-node-7"]
    assert {h["host"] for h in verdict.sections["hosts"]} == {"here", "gpu-node-7"}


def test_the_rank_on_the_gpu_a_fault_names_ranks_first(tmp_path):
    """gpu-node-9: a real L4 nvidia-smi (GPU 0 = 0000:01:00) and a real 'GPU at 0000:01:00.0 has fallen off the bus'."""
    writer = BundleWriter(tmp_path / "b")
    kernel = tmp_path / "kernel.log"
    kernel.write_text("[   49.261458] NVRM: GPU at 0000:01:00.0 has fallen off the bus.\n[   49.261465] NVRM: "
                      "os_pci_init_handle: invalid context!\n")
    host_from_files(writer, "gpu-node-9", {
        "kernel_log": ("kernel.log", kernel),
        "nvidia_smi": ("nvidia-smi-q.xml", FIXTURES / "nvsmi" / "l4-healthy.xml"),
    })
    on_gpu = rank_with_log(writer, "gpu-node-9", 4, 401, ["step 9"])
    on_gpu.local_rank = 0
    elsewhere = rank_with_log(writer, "gpu-node-9", 5, 402, ["step 9"])
    elsewhere.local_rank = 0
    env_rel = writer.write_json(f"{elsewhere.dir}/environ.json", {"CUDA_VISIBLE_DEVICES": "1", "LOCAL_RANK": "0"})
    elsewhere.collectors.append(CollectorRecord("environment", "ok", files=[env_rel]))
    writer.save()
    ev = load_path(writer.root)
    suspects = host_suspects(host_reports(ev, knowledge.load(use_env=False)), ev.ranks)
    by_rank = {s.rank: s for s in suspects}
    assert by_rank[4].confidence > by_rank[5].confidence >= 0.85
    assert any("own GPU" in e and "(0000:01:00)" in e for e in by_rank[4].evidence), by_rank[4].evidence
    # rank 5 runs on physical GPU 1, which this one-GPU nvidia-smi does not list: no claim either way
    assert not any("GPU" in e and "names" in e for e in by_rank[5].evidence)


def test_hosts_json_validates_against_the_shipped_schema(faulty_bundle):
    jsonschema = pytest.importorskip("jsonschema")
    from forensics.schemas import load

    out = hosts_cli(str(faulty_bundle), "--json")
    data = json.loads(out.stdout)
    assert data["schema"] == "hang-forensics/hosts/1" and data["exit_code"] == out.returncode == 5
    jsonschema.validate(data, load("hosts"))
