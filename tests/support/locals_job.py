"""A real 2-rank gloo job for the py-spy --locals collector (issue 39 item 1): rank 0 blocks in `dist.recv(src=1)`
called from a function whose argument holds a decoy secret, rank 1 sleeps outside any torch.distributed call.

    python locals_job.py RANK PORT READY_FILE
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

import torch
import torch.distributed as dist


def stage(buf: torch.Tensor, token: str) -> None:
    """The receive under a frame whose locals must never reach the bundle."""
    dist.recv(buf, src=1)


def main(argv: list[str]) -> int:
    rank, port, ready = int(argv[0]), int(argv[1]), Path(argv[2])
    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=2)
    Path(f"{ready}.{rank}").write_text("1")
    if rank == 0:
        stage(torch.ones(1 << 18), token="hunter2-SECRET")
    else:
        time.sleep(600)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
