"""`forensics hosts` on the real bundle the host collectors wrote on an NVIDIA H200 (tests/fixtures/host/h200).

The machine was healthy, so the verdict must be 'healthy' with no finding; the device's own
`forensics hosts` answer (hosts.json, recorded there) must be reproduced here from the files.
"""

from __future__ import annotations

import json
import shutil

import pytest

from forensics.bundle.reader import open_bundle
from forensics.bundle.writer import BundleWriter
from hostinfo_helpers import FIXTURES, REPO, host_from_files, hosts_cli, rank_with_log
from parsers import knowledge
from parsers.gather.evidence import load_path
from parsers.judges.hosts import host_reports

pytestmark = pytest.mark.integration

H200 = FIXTURES / "h200"
VM = H200 / "bundle" / "hosts" / "vm"


@pytest.fixture(scope="module")
def h200_bundle(tmp_path_factory):
    """A copy of the committed bundle, so nothing the command might write lands in the fixtures."""
    root = tmp_path_factory.mktemp("h200") / "bundle"
    shutil.copytree(H200 / "bundle", root)
    return root


def test_real_h200_bundle_is_healthy(h200_bundle):
    out = hosts_cli(str(h200_bundle), "--json", "--facts")
    assert out.returncode == 0, out.stderr
    data = json.loads(out.stdout)
    assert (data["overall"], data["healthy"], data["exclude_list"]) == ("healthy", ["vm"], "")
    host = data["hosts"][0]
    assert host["status"] == "healthy" and host["reasons"] == [] and host["other_findings"] == []
    assert host["evidence_collected"] == ["memory", "cpufreq", "disk", "kernel_log", "nvidia_smi", "nvml"]
    assert host["evidence_missing"] == []
    assert len(host["not_applicable"]) == 1 and host["not_applicable"][0].startswith("infiniband:")
    assert "/sys/class/infiniband" in host["not_applicable"][0] and "empty" in host["not_applicable"][0]


def test_verdict_and_facts_match_what_the_device_printed(h200_bundle):
    """The H200 ran `forensics hosts` on this bundle itself; the same files give the same answer here."""
    device = json.loads((H200 / "hosts.json").read_text())
    here = json.loads(hosts_cli(str(h200_bundle), "--json", "--facts").stdout)
    facts_here, facts_device = here["hosts"][0].pop("facts"), device["hosts"][0].pop("facts")
    assert here.pop("schema") == "hang-forensics/hosts/1"  # the JSON envelope came after the device's run
    here.pop("exit_code", None), device.pop("exit_code", None)  # hosts to act on: 4 then, 5 now (docs/exit-codes.md)
    assert (here.pop("not_listed"), here.pop("culprit")) == ([], None)  # added after the device's run (issue 27)
    for host in here["hosts"]:
        assert host.pop("listed") is True
        assert host.pop("kernel_times") == []  # added after the device's run (kernel lines' own times)
    assert here == device
    # every fact the device printed is reproduced; newer readers may add facts (temperature.tlimit_*)
    assert set(facts_here) == set(facts_device)
    for subject, facts in facts_device.items():
        assert {k: facts_here[subject][k] for k in facts} == facts, subject
    gpu = facts_here["gpu 00000000:00:06.0"]
    assert (gpu["temperature.tlimit_margin"], gpu["temperature.tlimit_slowdown"]) == (49, -2)
    assert (gpu["name"], gpu["pcie.gen.current"], gpu["pcie.width.current"],
            gpu["ecc.volatile.dram.uncorrectable"]) == ("NVIDIA H200", 5, 16, 0)
    # slowdown/shutdown come from NVML (absolute); nvidia-smi only printed them relative to T.Limit
    assert (gpu["temperature.gpu"], gpu["temperature.gpu_slowdown"], gpu["temperature.gpu_shutdown"]) == (38, 89, 95)


def test_text_only_nvidia_smi_gives_the_same_gpu_facts(tmp_path):
    """Where `-q -x` failed and only `-q` text exists, the H200 gets the same GPU facts and verdict."""
    writer = BundleWriter(tmp_path / "b")
    host_from_files(writer, "vm", {
        "kernel_log": ("kernel.log", VM / "kernel.log"),
        "nvidia_smi": ("nvidia-smi-q.txt", VM / "nvidia-smi-q.txt"),
        "nvml": ("nvml.json", VM / "nvml.json"),
    })
    writer.save()
    report = host_reports(load_path(writer.root), knowledge.load(use_env=False))[0]
    device = json.loads((H200 / "hosts.json").read_text())["hosts"][0]["facts"]["gpu 00000000:00:06.0"]
    assert report.status == "healthy" and report.groups == []
    gpu = report.facts["gpu 00000000:00:06.0"]
    assert {k: gpu[k] for k in device} == device


def test_the_real_h200_oom_on_a_rank_blames_the_code_not_the_host(tmp_path):
    """The provoked OOM message, as a rank's stderr on this host: a cuda-oom finding, host still healthy."""
    oom = (H200 / "provoke.txt").read_text().splitlines()[0].split(": ", 1)[1]
    writer = BundleWriter(tmp_path / "b")
    host_from_files(writer, "vm",
                    {"kernel_log": ("kernel.log", VM / "kernel.log"),
                     "nvidia_smi": ("nvidia-smi-q.xml", VM / "nvidia-smi-q.xml")})
    rank_with_log(writer, "vm", 0, 4242, ["step 3", oom])
    writer.save()
    out = hosts_cli(str(writer.root), "--json")
    assert out.returncode == 0, out.stderr
    host = json.loads(out.stdout)["hosts"][0]
    assert host["status"] == "healthy" and host["reasons"] == []
    assert [(f["id"], f["action"]) for f in host["other_findings"]] == [("cuda-oom", "fix-code")]


def test_manifest_says_honestly_where_the_kernel_log_came_from():
    """dmesg_restrict was 1 there, but the snapshot ran as root: `dmesg -T` worked at the first try."""
    bundle = open_bundle(H200 / "bundle")
    kernel = next(c for c in bundle.manifest.hosts[0].collectors if c.name == "kernel_log")
    assert (kernel.status, kernel.details["source"], kernel.details["attempts"],
            kernel.details["truncated"]) == ("ok", "dmesg -T", [], False)
    assert kernel.details["lines"] == 358  # as collected; the fixture keeps 335 (README: trimmed)



NCCL_BUNDLES = (sorted((REPO / "tests" / "fixtures" / "nccl").glob("*/bundle/manifest.json"))
                + sorted((REPO / "tests" / "fixtures" / "nccl_x2").glob("*/*/bundle/manifest.json")))


@pytest.mark.parametrize("manifest", NCCL_BUNDLES,
                         ids=[str(p.parent.parent.relative_to(REPO / "tests" / "fixtures")) for p in NCCL_BUNDLES])
def test_h200_hosts_of_the_nccl_hang_bundles_are_healthy(manifest):
    """The hangs there were made by the job (sleep, SIGSTOP, kill), not by the H200s: no host reason."""
    reports = [r for r in host_reports(load_path(manifest.parent), knowledge.load(use_env=False)) if r.host == "vm"]
    assert len(reports) == 1
    report = reports[0]
    assert report.status == "healthy" and report.reasons == [], [g.describe() for g in report.reasons]
    gpus = [s for s in report.facts if s.startswith("gpu ")]
    assert gpus and all(report.facts[s]["name"] == "NVIDIA H200" for s in gpus)
