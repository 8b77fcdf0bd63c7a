"""One leader per incident, so a job-wide collection is asked for once, not by every rank.

First choice: the job's own torch.distributed store (an atomic `add` on one key: the rank
that reads 1 leads). The store is served by a thread of rank 0's process, so it answers
even while every main thread is stuck in a collective. If the store does not answer in
a few seconds (rank 0 dead or wedged), an O_EXCL lock file decides instead: one leader
per shared directory (per host when the directory is local).
"""

from __future__ import annotations

import os
import threading
from pathlib import Path
from typing import Any, Callable

KEY_PREFIX = "forensics/trigger"


def default_store() -> Any | None:
    """The default process group's store, or None when torch.distributed is not initialised."""
    try:
        import torch.distributed as dist

        if not dist.is_available() or not dist.is_initialized():
            return None
        return dist.distributed_c10d._get_default_store()
    except Exception:  # any torch without it: fall back to the lock file
        return None


def _store_add(store: Any, key: str, timeout: float) -> int | None:
    """store.add(key, 1) with a time limit (the call itself may block on a dead store)."""
    result: list[int] = []

    def body() -> None:
        try:
            result.append(int(store.add(key, 1)))
        except Exception:
            pass

    worker = threading.Thread(target=body, daemon=True, name="forensics-election")
    worker.start()
    worker.join(timeout)
    return result[0] if result else None


def _lock_file(lock_dir: Path, incident: str) -> bool:
    lock_dir.mkdir(parents=True, exist_ok=True)
    try:
        fd = os.open(lock_dir / f"leader-{incident}.lock", os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644)
    except FileExistsError:
        return False
    with os.fdopen(fd, "w") as handle:
        handle.write(f"{os.getpid()}\n")
    return True


def elect(incident: str, lock_dir: Path, store: Any | None = None, timeout: float = 5.0) -> tuple[bool, str]:
    """(am_i_leader, how it was decided) for this incident id."""
    if store is not None:
        count = _store_add(store, f"{KEY_PREFIX}/leader/{incident}", timeout)
        if count is not None:
            return count == 1, "store"
    return _lock_file(lock_dir, incident), "lock file"


def publish_self(store: Any, rank: int, host: str, pid: int) -> None:
    """Tell the job where this rank lives, so a leader can name every rank's host and pid."""
    store.set(f"{KEY_PREFIX}/who/{rank}", f"{host} {pid}")


def read_ranks(store: Any, world: int, key: Callable[[int], str], decode: Callable[[bytes], Any],
               timeout: float = 5.0, name: str = "forensics-store-read") -> dict[int, Any]:
    """rank -> decode(value) for the ranks whose key is in the store; never waits for a missing one,
    and the whole read is bounded in time (a thread: a store call can block on a dead master)."""
    found: dict[int, Any] = {}

    def body() -> None:
        for rank in range(world):
            try:
                if store.check([key(rank)]):
                    found[rank] = decode(store.get(key(rank)))
            except Exception:
                continue

    worker = threading.Thread(target=body, daemon=True, name=name)
    worker.start()
    worker.join(timeout)
    return dict(found)


def read_members(store: Any, world: int, timeout: float = 5.0) -> dict[int, tuple[str, int]]:
    """rank -> (host, pid) for the ranks that published themselves; never waits for a missing one."""

    def decode(raw: bytes) -> tuple[str, int]:
        host, pid = raw.decode().split()
        return host, int(pid)

    return read_ranks(store, world, lambda rank: f"{KEY_PREFIX}/who/{rank}", decode, timeout, "forensics-members")
