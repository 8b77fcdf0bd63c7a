"""Mutated inputs for the readers, seeded from real fixtures (used by the fuzz test and benchmark).

Why seeded from real files: random bytes are rejected by the first check of every
reader; mutations of real NCCL logs, Flight Recorder dumps, manifests and py-spy
output reach deep into each reader, where the hostile cases are (a 5000-digit
opCount, a 60 KB line, JSON nested a thousand deep, a truncated pickle).
"""

from __future__ import annotations

import random
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
FIX = REPO / "tests" / "fixtures"

#: one or more real files of every kind the registry reads
SEEDS = [
    "nccl/sleep/node05/nccl.node05.483.log",
    "nccl/sleep/node00/rank0.stderr",
    "nccl/sleep/node00/fr_live_rank_0",
    "nccl/sleep/node00/fr_live_rank_0.json",
    "nccl/sigstop/ras_verbose.txt",
    "nccl/sigstop/bundle/hosts/vm/ras_status.json",
    "nccl/sigstop/bundle/hosts/vm/rank3-pid686/proc.json",
    "nccl/sigstop/bundle/hosts/vm/rank3-pid686/environ.json",
    "nccl/sigstop/bundle/hosts/vm/rank3-pid686/nccl_recorder/nccl-recorder.node03.686.0.bin",
    "nccl/sigstop/bundle/hosts/vm/nvml.json",
    "nccl/sigstop/bundle/hosts/vm/nvidia-smi-q.xml",
    "nccl/sigstop/bundle/hosts/vm/nvidia-smi-q.txt",
    "nccl/sigstop/bundle/hosts/vm/kernel.log",
    "nccl/sigstop/bundle/hosts/vm/memory.json",
    "nccl/sigstop/bundle/hosts/vm/cpufreq.json",
    "nccl/sigstop/bundle/hosts/vm/df.txt",
    "nccl/sigstop/bundle/manifest.json",
    "pyspy/dump.txt",
    "gloo/sleep/node00/rank0.stderr",
    "realworld/rccl-429.log",
    "realworld/paddle-14625.log",
    "realworld/nvsentinel-155.log",
    "host/kernel/public-gpu-faults.log",
]


def seeds() -> list[tuple[str, bytes]]:
    """(file name, content) of every seed that exists, the first 256 KiB of each."""
    out = []
    for rel in SEEDS:
        p = FIX / rel
        if p.is_file():
            out.append((p.name, p.read_bytes()[: 256 * 1024]))
    return out


def mutate(data: bytes, rng: random.Random) -> bytes:
    """One hostile variation of `data`."""
    kind = rng.randrange(11)
    b = bytearray(data)
    if kind == 0 and b:  # bit flips
        for _ in range(rng.randint(1, 16)):
            i = rng.randrange(len(b))
            b[i] ^= 1 << rng.randrange(8)
    elif kind == 1 and b:  # truncation
        del b[rng.randrange(len(b)):]
    elif kind == 2:  # a huge number where a number was
        digits = str(rng.choice([9, 10**19, 2**63,
                                 4000000000])) if rng.random() < 0.5 else "9" * rng.choice([400, 5000])
        i = rng.randrange(len(b) + 1)
        b[i:i] = digits.encode()
    elif kind == 3:  # one very long line
        i = rng.randrange(len(b) + 1)
        b[i:i] = (b"a:1:1 [0] " * rng.randint(1000, 7000))
    elif kind == 4:  # deep JSON
        depth = rng.choice([100, 1200, 5000])
        b = (bytearray(b"[" * depth + b"]" * depth) if rng.random() < 0.5
             else bytearray(b'{"a":' * depth + b"1" + b"}" * depth))
    elif kind == 5 and b:  # duplicate a slice
        i, j = sorted(rng.randrange(len(b)) for _ in range(2))
        b[j:j] = b[i:j][:65536]
    elif kind == 6:  # NUL and invalid UTF-8
        i = rng.randrange(len(b) + 1)
        b[i:i] = bytes(rng.randrange(256) for _ in range(rng.randint(1, 64)))
    elif kind == 7:  # wrong JSON types
        b = bytearray(rng.choice([b"null", b"1e400", b'"x"', b"[1,2,3]", b'{"pid": "x", "state": []}',
                                  b'{"ranks": [{"rank": "a"}], "returncode": 1}',
                                  b'{"format":"hang-forensics-bundle","version":1,"created":"x","tool_version":"x",'
                                  b'"ranks":[{"host":"h","pid":1,"dir":"d","world_size":4000000000}]}']))
    elif kind == 8 and b:  # lines shuffled
        lines = bytes(b).split(b"\n")
        rng.shuffle(lines)
        b = bytearray(b"\n".join(lines))
    elif kind == 9:  # CR instead of LF, tabs, control characters
        b = bytearray(bytes(b).replace(b"\n", rng.choice([b"\r", b"\r\n", b"\x0b", b"\x1b[36m"])))
    else:  # several mutations
        for _ in range(3):
            b = bytearray(mutate(bytes(b), rng))
    return bytes(b[: 4 * 1024 * 1024])
