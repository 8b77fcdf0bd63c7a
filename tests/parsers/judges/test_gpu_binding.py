"""Which GPU a finding names and which GPU a rank used, as PCI addresses."""

from __future__ import annotations

import pytest

from parsers.judges import gpu_binding


@pytest.mark.parametrize(
    "text,bus",
    [
        ("NVRM: Xid (PCI:0000:06:00): 79, GPU has fallen off the bus.", (0, 0x06, 0x00)),
        ("NVRM: Xid (PCI:0000:10:1c): 63, pid=1896, Row Remapper", (0, 0x10, 0x1C)),
        ("NVRM: GPU at 0000:01:00.0 has fallen off the bus.", (0, 0x01, 0x00)),
        ("gpu 00000000:10:1C.0", (0, 0x10, 0x1C)),
        ("NVRM: Xid (PCI:0004:01:00): 119, pid=430", (4, 0x01, 0x00)),
        ("mce: [Hardware Error]: Machine check events logged", None),
    ],
)
def test_bus_of_real_lines_and_subjects(text, bus):
    assert gpu_binding.bus_of(text) == bus


def test_gpu_order_is_pci_order_of_gpu_subjects():
    subjects = ["memory", "gpu 00000000:DB:00.0", "gpu 00000000:18:00.0", "disk /", "gpu 00000000:2A:00.0"]
    assert gpu_binding.gpu_order(subjects) == [(0, 0x18, 0), (0, 0x2A, 0), (0, 0xDB, 0)]


@pytest.mark.parametrize(
    "local_rank,env,index",
    [
        (3, {}, 3),
        (1, {"CUDA_VISIBLE_DEVICES": "4,5,6,7"}, 5),
        (0, {"CUDA_VISIBLE_DEVICES": "2"}, 2),
        (0, {"CUDA_VISIBLE_DEVICES": "GPU-c5533cd4-5a60-059e-348d-b6d7466932e4"}, None),
        (2, {"CUDA_VISIBLE_DEVICES": "0,1"}, None),
        (None, {}, None),
    ],
)
def test_rank_device_index(local_rank, env, index):
    assert gpu_binding.rank_device_index(local_rank, env) == index
