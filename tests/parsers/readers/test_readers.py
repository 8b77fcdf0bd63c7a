"""Host readers on real outputs: this machine's dmesg/df/meminfo, public nvidia-smi text and XML."""

from __future__ import annotations

import json

import pytest

from parsers.readers import host_ib, host_kernel, host_nvml, host_nvsmi, host_system
from kbtest_helpers import FIXTURES

DEV = FIXTURES / "dev-vm"


@pytest.mark.parametrize(
    "line,stamp,message",
    [
        ("[Sun Nov 29 08:56:12 2026] Memory cgroup out of memory: Killed process 5320 (python3)",
         "Sun Nov 29 08:56:12 2026", "Memory cgroup out of memory: Killed process 5320 (python3)"),
        ("[  843.072392] INFO: task python3:5604 blocked for more than 120 seconds.", "843.072392",
         "INFO: task python3:5604 blocked for more than 120 seconds."),
        ("May  7 06:45:12 errol kernel: [21584690.529862] mce: [Hardware Error]: Machine check events logged",
         "May  7 06:45:12", "mce: [Hardware Error]: Machine check events logged"),
        ("2024-04-29T14:55:41,679700+02:00 Out of memory: Killed process 1440763 (perl)",
         "2024-04-29T14:55:41,679700+02:00", "Out of memory: Killed process 1440763 (perl)"),
        ("5,0,0,-;Linux version 6.18.44-fc-v595 (builder@sandboxing)", "5,0,0,-",
         "Linux version 6.18.44-fc-v595 (builder@sandboxing)"),
        ("<3>[6085126.134786] nvidia-nvswitch0: SXid (PCI:0000:06:00.0): 28002, Non-fatal", "6085126.134786",
         "nvidia-nvswitch0: SXid (PCI:0000:06:00.0): 28002, Non-fatal"),
        ("[  130.456250] [ T1946] NVRM: Xid (PCI:0000:2b:00): 31, pid=1942", "130.456250",
         "NVRM: Xid (PCI:0000:2b:00): 31, pid=1942"),
        ("kernel: NVRM: Xid (PCI:0000:c1:00): 74, pid='<unknown>'", None,
         "NVRM: Xid (PCI:0000:c1:00): 74, pid='<unknown>'"),
    ],
)
def test_kernel_prefixes_are_split(line, stamp, message):
    assert host_kernel.split_prefix(line) == (stamp, message)


def test_real_dmesg_outputs_decode_every_line():
    for name in ("dev-vm-dmesg-T.log", "dev-vm-dmesg-raw.log"):
        text = (FIXTURES / "kernel" / name).read_text()
        lines = host_kernel.read_kernel_log(text)
        assert len(lines) == len([ln for ln in text.splitlines() if ln.strip()])
        assert all(ln.stamp for ln in lines if ln.raw.startswith("[")), name
        assert lines[0].message.startswith("Linux version")


def test_nvidia_smi_text_real_a100_with_pending_remap():
    gpus = host_nvsmi.parse_text((FIXTURES / "nvsmi" / "a100-remap-pending.txt").read_text())
    facts = gpus["00000000:10:1C.0"]
    assert facts["name"] == "NVIDIA A100-SXM4-80GB"
    assert facts["ecc.volatile.dram.correctable"] == 177
    assert facts["ecc.volatile.dram.uncorrectable"] == 0
    assert facts["remapped_rows.pending"] is True and facts["remapped_rows.failure"] is False
    assert "retired_pages.pending" not in facts  # N/A is left out, not guessed


def test_nvidia_smi_text_feeds_the_remap_pending_entry(kb):
    facts = host_nvsmi.parse_text((FIXTURES / "nvsmi" / "a100-remap-pending.txt").read_text())["00000000:10:1C.0"]
    assert {f.entry.id for f in kb.match_facts("gpu", facts)} == {"gpu-row-remap-pending"}


def test_nvidia_smi_xml_real_l4_is_healthy(kb):
    gpus = host_nvsmi.parse_xml((FIXTURES / "nvsmi" / "l4-healthy.xml").read_text())
    facts = gpus["00000000:01:00.0"]
    assert facts["name"] == "NVIDIA L4" and facts["serial"] == "1654523003308"
    assert (facts["pcie.width.current"], facts["pcie.width.max"], facts["pcie.gen.max"]) == (16, 16, 4)
    assert facts["throttle.gpu_idle"] is True and facts["throttle.hw_slowdown"] is False
    assert facts["ecc.volatile.sram_secded.uncorrectable"] == 0
    assert facts["temperature.gpu"] == 45
    assert [f.entry.id for f in kb.match_facts("gpu", facts)] == []


@pytest.mark.parametrize("text", ["", "hello\nworld", "Filesystem  Size\n"])
def test_nvidia_smi_text_rejects_foreign_text(text):
    with pytest.raises(host_nvsmi.NvsmiError):
        host_nvsmi.parse_text(text)


@pytest.mark.parametrize("text", ["<a><b></a>", "<html></html>",
                                  '<!DOCTYPE x [<!ENTITY e SYSTEM '
                                  '"file:///etc/passwd">]><nvidia_smi_log>&e;</nvidia_smi_log>'])
def test_nvidia_smi_xml_rejects_bad_or_foreign_xml(text):
    with pytest.raises(host_nvsmi.NvsmiError):
        host_nvsmi.parse_xml(text)


def test_nvml_bitmask_and_rows_decode():
    data = {"gpus": [{"bus_id": "00000000:18:00.0", "clock_event_reasons": 0x48, "remapped_rows": [0, 2, 1, 0],
                      "retired_pages_pending": 0, "ecc_volatile_uncorrected": 3, "pcie_width_current": 8,
                      "pcie_width_max": 16}]}
    facts = host_nvml.parse_nvml_json(json.dumps(data))["00000000:18:00.0"]
    assert facts["throttle.hw_slowdown"] and facts["throttle.hw_thermal_slowdown"] and not facts["throttle.gpu_idle"]
    assert facts["remapped_rows.pending"] is True and facts["remapped_rows.uncorrectable"] == 2
    assert facts["ecc.volatile.total.uncorrectable"] == 3


def test_ib_sysfs_values_decode():
    data = {"devices": {"mlx5_0": {"ports": {"1": {"state": "1: DOWN", "phys_state": "3: Disabled",
                                                   "rate": "400 Gb/sec (4X NDR)", "link_layer": "InfiniBand",
                                                   "counters": {"link_downed": "2", "symbol_error": "0"},
                                                   "hw_counters": {}}}}}}
    facts = host_ib.parse_ib_json(json.dumps(data))["ib mlx5_0/1"]
    assert facts == {"ib.state": "DOWN", "ib.phys_state": "Disabled", "ib.link_layer": "InfiniBand",
                     "ib.rate_gbps": 400.0, "ib.counter.link_downed": 2, "ib.counter.symbol_error": 0}


def test_real_df_outputs_of_this_machine():
    space = host_system.parse_df((DEV / "df.txt").read_text())
    inodes = host_system.parse_df((DEV / "df-inodes.txt").read_text(), inodes=True)
    assert space["disk /"]["disk.fstype"] == "ext4"
    assert 0 <= space["disk /"]["disk.used_pct"] <= 100
    assert 0 <= inodes["disk /"]["disk.inodes_used_pct"] <= 100
    with pytest.raises(host_system.HostDataError):
        host_system.parse_df("not df\n")


def test_real_meminfo_and_psi_of_this_machine():
    facts = host_system.parse_memory_json((DEV / "memory.json").read_text())
    assert 0 < facts["memory.available_pct"] <= 100
    assert {"psi.memory.full.avg10", "psi.io.some.avg60", "psi.cpu.some.avg10"} <= set(facts)


def test_real_cpufreq_of_this_machine_has_no_governors():
    facts = host_system.parse_cpufreq_json((DEV / "cpufreq.json").read_text())
    assert facts["cpu.count"] == 2 and facts["cpu.mhz.min"] > 0
    assert not [k for k in facts if k.startswith("cpu.governor.")]
