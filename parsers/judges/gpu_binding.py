"""Which GPU a rank used, and which GPU a finding names, as PCI addresses.

A host fault usually names one GPU (Xid lines carry 'PCI:0000:06:00', nvidia-smi
facts a bus id); the rank bound to that GPU is the one whose work stopped, the
others on the host wait for it. The binding follows CUDA's defaults: the rank's
device is CUDA_VISIBLE_DEVICES[LOCAL_RANK] (or LOCAL_RANK), counted in PCI bus
order, which is CUDA's order on hosts of identical GPUs. When any of that is
unknown the answer is None and nothing is refined.
"""

from __future__ import annotations

import re
from typing import Any, Iterable

Bus = tuple[int, int, int]  #: (domain, bus, device)

_BUS = re.compile(r"(?:PCI:|GPU at |GPU |gpu )([0-9A-Fa-f]{4,8}):([0-9A-Fa-f]{2}):([0-9A-Fa-f]{2})")


def bus_of(text: str) -> Bus | None:
    """The first GPU PCI address named in a line or subject, or None."""
    m = _BUS.search(text)
    return (int(m.group(1), 16), int(m.group(2), 16), int(m.group(3), 16)) if m else None


def gpu_order(subjects: Iterable[str]) -> list[Bus]:
    """PCI addresses of the host's GPUs ('gpu <bus id>' fact subjects), in bus order."""
    found = {bus_of(s) for s in subjects if s.startswith("gpu ")}
    return sorted(b for b in found if b is not None)


def rank_device_index(local_rank: int | None, environ: dict[str, str] | None) -> int | None:
    """Physical GPU index of a rank: CUDA_VISIBLE_DEVICES[local_rank], else local_rank."""
    if local_rank is None:
        return None
    visible = (environ or {}).get("CUDA_VISIBLE_DEVICES")
    if visible is None:
        return local_rank
    items = [v.strip() for v in visible.split(",") if v.strip()]
    if local_rank >= len(items):
        return local_rank if len(items) == 1 and items[0].isdigit() and local_rank == 0 else None
    item = items[local_rank] if len(items) > 1 else items[0]
    return int(item) if item.isdigit() else None  # GPU-UUID or MIG names: not resolved here


def rank_bus(rank: Any, order: list[Bus]) -> Bus | None:
    """PCI address of the GPU a rank (parsers.gather.evidence.RankEvidence) used, when it can be told."""
    visible = None
    for art in getattr(rank, "files", ()):
        if art.kind == "environment" and art.parsed:
            visible = art.parsed.facts.get("cuda_visible_devices")
    env = {"CUDA_VISIBLE_DEVICES": visible} if visible is not None else None
    index = rank_device_index(rank.record.local_rank, env)
    if index is None or index >= len(order):
        return None
    return order[index]
