"""Host readers and the knowledge base on real outputs of NVIDIA H200 machines (driver 580.159.04).

tests/fixtures/host/h200/ is one H200 recorded by scripts/device/host_snapshot.sh (see its
README); the 1-GPU and 2-GPU bundles under tests/fixtures/nccl*/ carry the same collectors'
outputs from the NCCL hang scenarios. Every value asserted here was printed by the machine.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from kbtest_helpers import FIXTURES
from parsers.readers import host_kernel, host_nvml, host_nvsmi, host_system

H200 = FIXTURES / "h200"
VM = H200 / "bundle" / "hosts" / "vm"
BUS = "00000000:00:06.0"
NCCL_HOSTS = (sorted((FIXTURES.parent / "nccl").glob("*/bundle/hosts/vm"))
              + sorted((FIXTURES.parent / "nccl_x2").glob("*/*/bundle/hosts/vm")))
ALL_HOSTS = [VM] + NCCL_HOSTS
ECC_COUNTERS = [
    f"ecc.{scope}.{memory}.{kind}"
    for scope in ("volatile", "aggregate")
    for memory, kind in (("sram", "correctable"), ("sram_parity", "uncorrectable"), ("sram_secded", "uncorrectable"),
                         ("dram", "correctable"), ("dram", "uncorrectable"))
]
THROTTLE = ["gpu_idle", "applications_clocks_setting", "sw_power_cap", "hw_slowdown", "hw_thermal_slowdown",
            "hw_power_brake_slowdown", "sync_boost", "sw_thermal_slowdown", "display_clocks_setting"]


def _text(path: Path) -> str:
    return path.read_text(encoding="utf-8")


def _real_lines(path: Path, *starts: str) -> list[str]:
    """The first line of a real file starting with each of `starts`, in that order: a small real snippet."""
    lines = _text(path).splitlines()
    out, at = [], 0
    for start in starts:
        at = next(i for i in range(at, len(lines)) if lines[i].startswith(start))
        out.append(lines[at])
    return out


@pytest.fixture(scope="module")
def text_facts():
    return host_nvsmi.parse_text(_text(VM / "nvidia-smi-q.txt"))


@pytest.fixture(scope="module")
def xml_facts():
    return host_nvsmi.parse_xml(_text(VM / "nvidia-smi-q.xml"))


def test_nvsmi_text_decodes_the_h200_fields(text_facts):
    assert list(text_facts) == [BUS]
    f = text_facts[BUS]
    assert (f["name"], f["serial"], f["uuid"]) == ("NVIDIA H200", "1653924185248",
                                                   "GPU-8003a68a-5f2a-61c4-c1b4-a62117d4a22b")
    assert f["ecc.mode.current"] == "Enabled"
    assert {k: f[k] for k in ECC_COUNTERS} == dict.fromkeys(ECC_COUNTERS, 0)
    assert (f["remapped_rows.correctable"], f["remapped_rows.uncorrectable"], f["remapped_rows.pending"],
            f["remapped_rows.failure"]) == (0, 0, False, False)
    assert (f["pcie.gen.current"], f["pcie.gen.max"], f["pcie.width.current"], f["pcie.width.max"]) == (5, 5, 16, 16)
    assert (f["temperature.gpu"], f["temperature.memory"]) == (38, 40)
    assert (f["temperature.tlimit_margin"], f["temperature.tlimit_slowdown"],
            f["temperature.tlimit_shutdown"]) == (49, -2, -8)
    assert {k: f[f"throttle.{k}"] for k in THROTTLE} == dict.fromkeys(THROTTLE, False)
    # Hopper on driver 580 prints 'N/A' for retired pages (it remaps rows instead): left out, not guessed
    assert not [k for k in f if k.startswith("retired_pages.")]


def test_nvsmi_xml_gives_the_same_facts_as_the_text(text_facts, xml_facts):
    assert xml_facts == text_facts


def test_sec_ded_and_display_clock_lines_get_the_xml_names():
    """Real text lines whose slugs used to differ from the XML tags (sram_sec_ded, display_clock_setting)."""
    lines = ["==============NVSMI LOG==============", f"GPU {BUS}"]
    lines += _real_lines(VM / "nvidia-smi-q.txt", "    Clocks Event Reasons", "        Display Clock Setting",
                         "    ECC Errors", "        Volatile", "            SRAM Uncorrectable SEC-DED")
    facts = host_nvsmi.parse_text("\n".join(lines) + "\n")[BUS]
    assert facts == {"throttle.display_clocks_setting": False, "ecc.volatile.sram_secded.uncorrectable": 0}


def test_relative_t_limit_thresholds_are_not_read_as_slowdown_temperatures(text_facts, xml_facts, kb):
    """Driver 580 prints 'GPU Slowdown T.Limit Temp : -2 C' (relative to T.Limit): reading it as the
    absolute slowdown temperature would make a 38 C GPU 'hotter than its slowdown temperature'."""
    assert "GPU Slowdown T.Limit Temp                      : -2 C" in _text(VM / "nvidia-smi-q.txt")
    for facts in (text_facts[BUS], xml_facts[BUS]):
        assert "temperature.gpu_slowdown" not in facts and "temperature.gpu_shutdown" not in facts
        assert kb.match_facts("gpu", facts) == []
    # the relative form has its own entry: 49 C of margin is far from the -2 C slowdown offset
    assert kb.get("gpu-tlimit-slowdown").match_facts(text_facts[BUS]) == []
    hot = dict(text_facts[BUS], **{"temperature.tlimit_margin": -2})
    assert [f.entry.id for f in kb.match_facts("gpu", hot)] == ["gpu-tlimit-slowdown"]


def test_text_and_xml_agree_on_every_real_h200(kb):
    """Same fact names from both forms on all recorded H200s (1 and 2 GPUs); counters equal."""
    assert len(ALL_HOSTS) >= 7
    for host in ALL_HOSTS:
        text = host_nvsmi.parse_text(_text(host / "nvidia-smi-q.txt"))
        xml = host_nvsmi.parse_xml(_text(host / "nvidia-smi-q.xml"))
        assert sorted(text) == sorted(xml), host
        for bus, facts in text.items():
            assert set(facts) == set(xml[bus]), (host, set(facts) ^ set(xml[bus]))
            steady = [k for k in facts if k.startswith(("ecc.", "remapped_rows.", "pcie.", "name", "serial", "uuid"))]
            assert {k: facts[k] for k in steady} == {k: xml[bus][k] for k in steady}, host
            assert kb.match_facts("gpu", facts) == [], host


def test_two_gpu_h200_host_decodes_both_gpus():
    host = FIXTURES.parent / "nccl_x2" / "p2p" / "sleep" / "bundle" / "hosts" / "vm"
    gpus = host_nvsmi.parse_xml(_text(host / "nvidia-smi-q.xml"))
    assert {bus: facts["serial"] for bus, facts in gpus.items()} == {"00000000:00:06.0": "1654024076456",
                                                                     "00000000:00:07.0": "1654024076272"}
    assert all(facts["name"] == "NVIDIA H200" and facts["pcie.width.current"] == 16 for facts in gpus.values())
    nvml = host_nvml.parse_nvml_json(_text(host / "nvml.json"))
    assert sorted(nvml) == sorted(gpus)


def test_nvml_json_of_the_h200(kb):
    gpus = host_nvml.parse_nvml_json(_text(VM / "nvml.json"))
    f = gpus[BUS]
    assert (f["name"], f["uuid"]) == ("NVIDIA H200", "GPU-8003a68a-5f2a-61c4-c1b4-a62117d4a22b")
    # NVML gives the absolute thresholds that the text/XML only print relative to T.Limit
    assert (f["temperature.gpu"], f["temperature.gpu_slowdown"], f["temperature.gpu_shutdown"]) == (38, 89, 95)
    assert [f[f"ecc.{s}.total.{k}"] for s in ("volatile",
                                              "aggregate") for k in ("correctable", "uncorrectable")] == [0, 0, 0, 0]
    assert (f["remapped_rows.correctable"], f["remapped_rows.uncorrectable"], f["remapped_rows.pending"],
            f["remapped_rows.failure"]) == (0, 0, False, False)
    assert (f["pcie.gen.current"], f["pcie.width.current"]) == (5, 16)
    # clock_event_reasons was 1 (GPU idle) when NVML looked; nvidia-smi, a moment earlier, saw it busy
    assert f["throttle.gpu_idle"] is True and not any(f[f"throttle.{k}"] for k in THROTTLE if k != "gpu_idle")
    # retired pages: NVMLError_NotSupported on Hopper, recorded as errors, so no fact
    assert not [k for k in f if k.startswith("retired_pages.")]
    assert kb.match_facts("gpu", f) == []


def test_h200_kernel_log_decodes_and_matches_nothing(kb):
    text = _text(VM / "kernel.log")
    lines = host_kernel.read_kernel_log(text)
    assert len(lines) == len([ln for ln in text.splitlines() if ln.strip()]) == 335
    assert all(ln.stamp and ln.stamp.endswith(" 2026") for ln in lines)
    assert lines[0].message.startswith("Linux version 6.18.44-fc-v657-gpu")
    nvrm = [ln.message for ln in lines if ln.message.startswith("NVRM:")]
    # verbatim input: the kernel log's and the provoke run's own lines, kept as read
    assert nvrm[0].startswith("NVRM: loading NVIDIA UNIX Open Kernel Module for x86_64  580.159.04")
    # verbatim input: the kernel log's and the provoke run's own lines, kept as read
    assert "NVRM: gpuClearFbhubPoisonIntrForBug2924523_GA100: FBHUB Interrupt detected. Clearing it." in nvrm
    assert not [ln for ln in lines if "Xid" in ln.message]
    assert kb.scan_lines(host_kernel.numbered_messages(lines), "kernel", str(VM / "kernel.log"), "kernel") == []


def test_benign_boot_lines_of_every_h200_match_nothing(kb):
    """The NVRM boot lines (a 'Poison' interrupt cleared at load) seen on all recorded H200s are not faults."""
    seen = set()
    for host in ALL_HOSTS:
        for ln in host_kernel.read_kernel_log(_text(host / "kernel.log")):
            if ln.message.startswith("NVRM:"):
                seen.add(ln.message)
                assert kb.match_line(ln.message, "kernel") == [], ln.raw
    assert len(seen) == 3


def test_provoked_illegal_access_never_ran_so_no_xid_was_expected():
    """Honest record of the HF_PROVOKE run: the OOM was real, the illegal access never launched
    (triton.jit refused a kernel read from stdin), and dmesg after it equals dmesg before.
    dmesg_restrict was 1 but the snapshot ran as root, so the kernel log itself was readable."""
    provoke = _text(H200 / "provoke.txt").splitlines()
    # verbatim input: the kernel log's and the provoke run's own lines, kept as read
    assert provoke[0].startswith("CUDA-OOM: torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 279.60 GiB. "
                                 "GPU 0 has a total capacity of 139.80 GiB")
    # verbatim input: the kernel log's and the provoke run's own lines, kept as read
    assert provoke[1] == "ILLEGAL-ACCESS: builtins.ValueError: @jit functions should be defined in a Python file"
    meta = _text(H200 / "meta.txt")
    assert "dmesg_restrict: 1" in meta and "id: uid=0(root)" in meta


def test_real_h200_oom_message_matches_cuda_oom_on_rank_logs_only(kb):
    line = _text(H200 / "provoke.txt").splitlines()[0]
    assert [e.id for e, _ in kb.match_line(line, "rank-log")] == ["cuda-oom"]
    assert kb.match_line(line, "kernel") == []


def test_h200_system_files_decode():
    cpu = host_system.parse_cpufreq_json(_text(VM / "cpufreq.json"))
    assert (cpu["cpu.count"], cpu["cpu.mhz.min"], cpu["cpu.mhz.max"]) == (16, 2100.0, 2100.0)
    disk = host_system.parse_df(_text(VM / "df.txt"))
    inodes = host_system.parse_df(_text(VM / "df-inodes.txt"), inodes=True)
    assert (disk["disk /"]["disk.fstype"], disk["disk /"]["disk.used_pct"],
            inodes["disk /"]["disk.inodes_used_pct"]) == ("ext4", 21, 1)
    memory = host_system.parse_memory_json(_text(VM / "memory.json"))
    assert memory["memory.total_kb"] == 131981020 and memory["vmstat.oom_kill"] == 0
    assert memory["psi.cpu.some.avg10"] == 0.43


PROVOKED = H200 / "provoked"  # filled from a rerun of HF_PROVOKE=1 scripts/device/host_snapshot.sh (README)


@pytest.mark.skipif(not (PROVOKED / "kernel-dmesg-T-after.log").exists(),
                    reason="no provoked H200 run recorded yet (see tests/fixtures/host/h200/README.md)")
def test_provoked_illegal_access_leaves_an_xid_the_kb_names(kb):
    """A real MMU fault on the H200: the lines it added to dmesg are Xid lines of an application fault."""
    before = set(_text(PROVOKED / "kernel-dmesg-T.log").splitlines())
    after = host_kernel.read_kernel_log(_text(PROVOKED / "kernel-dmesg-T-after.log"))
    added = [ln for ln in after if ln.raw not in before]
    xids = [ln for ln in added if "NVRM: Xid" in ln.message]
    outputs = "".join(_text(p) for p in sorted(PROVOKED.glob("provoke*.txt")))
    assert "ILLEGAL_ADDRESS" in outputs or "illegal memory access" in outputs
    assert xids, [ln.raw for ln in added]
    for ln in xids:
        ids = [e.id for e, _ in kb.match_line(ln.message, "kernel")]
        assert len(ids) == 1 and ids[0] in ("xid-13", "xid-31", "xid-43"), (ln.raw, ids)
        assert kb.get(ids[0]).host == "none"  # the job's bug: the host stays in the pool
