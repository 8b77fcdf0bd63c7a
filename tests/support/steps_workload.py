"""A real (small, CPU) training loop whose step times carry a known pattern, recorded by forensics.arm().

--pattern checkpoint  torch.save + fsync of the model every --every steps (periodic slow steps)
--pattern gc          a history of small cyclic objects that grows every step, as metric
                      logs do: each automatic full collection walks more, steps slow down
--gc-every N          the cure: forensics.arm(gc=N)
"""

from __future__ import annotations

import argparse
import os
from pathlib import Path

import torch

import forensics


class Record:
    """A small object with a reference cycle, like the per-step records training code keeps."""

    def __init__(self, step: int) -> None:
        self.step = step
        self.meta = {"owner": self, "values": [step, step + 1]}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--pattern", choices=["checkpoint", "gc"], required=True)
    parser.add_argument("--steps", type=int, default=120)
    parser.add_argument("--every", type=int, default=10)
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--gc-every", type=int)
    args = parser.parse_args()
    torch.set_num_threads(1)
    args.out.mkdir(parents=True, exist_ok=True)
    trigger = forensics.arm(out=args.out, collect=False, set_env=False, track_collectives=False, stall_after=3600,
                            slow_factor=1e9, gc=args.gc_every)
    model = torch.nn.Sequential(torch.nn.Linear(512, 512), torch.nn.ReLU(), torch.nn.Linear(512, 512))
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    history: list[Record] = []
    big = torch.zeros(8_000_000)  # 32 MB of "optimizer state" to checkpoint
    for step in range(args.steps):
        loss = model(torch.randn(256, 512)).square().mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
        if args.pattern == "gc":
            history.extend(Record(step * 4000 + i) for i in range(4000))
            for _ in range(300):
                Record(-1)  # short-lived cyclic garbage keeps the collector running
        if args.pattern == "checkpoint" and step % args.every == args.every - 1:
            path = args.out / "ckpt.pt"
            torch.save({"model": model.state_dict(), "state": big}, path)
            with open(path, "rb") as handle:
                os.fsync(handle.fileno())
        trigger.step()
    forensics.disarm()


if __name__ == "__main__":
    main()
