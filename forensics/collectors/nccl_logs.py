"""NCCL's debug log of a rank, from NCCL_DEBUG_FILE with %h and %p expanded as NCCL does."""

from __future__ import annotations

import itertools
import os
import socket
from pathlib import Path

from parsers.model.manifest import CollectorRecord, Status
from parsers.gather.registry import collector_folder
from forensics.collectors.base import AlwaysEnabled, CollectOptions, RankTarget
from forensics.collectors.files import copy_target_log, process_path
from forensics.collect.budget import apparent_size
from parsers.input.safeio import UnsafeFile


def expand_debug_file(pattern: str, pid: int, host: str | None = None) -> str:
    """Expand NCCL_DEBUG_FILE's %h (host, cut at the first dot) and %p (pid); %% is a percent."""
    host = (host or socket.gethostname()).split(".", 1)[0]
    out, i = [], 0
    while i < len(pattern):
        ch = pattern[i]
        if ch == "%" and i + 1 < len(pattern):
            nxt = pattern[i + 1]
            out.append({"h": host, "p": str(pid), "%": "%"}.get(nxt, ch + nxt))
            i += 2
            continue
        out.append(ch)
        i += 1
    return "".join(out)


def find_debug_file(pattern: str, pid: int) -> Path | None:
    """The rank's NCCL log. %h is the *rank's* host name, which differs from ours when the
    rank runs in a container (its own UTS namespace): then match any host for this pid."""
    exact = process_path(pid, expand_debug_file(pattern, pid))
    if os.path.lexists(exact):
        return exact  # whatever it is: the copy decides (and says) whether it may be read
    if "%h" not in pattern:
        return None
    wild = process_path(pid, expand_debug_file(pattern.replace("%h", "\0"), pid).replace("\0", "*"))
    matches = sorted(itertools.islice(wild.parent.glob(wild.name), 2)) if wild.parent.is_dir() else []
    return matches[0] if len(matches) == 1 else None


class NcclLogCollector(AlwaysEnabled):
    name = "nccl_log"

    def collect(self, target: RankTarget, options: CollectOptions) -> CollectorRecord:
        pattern = target.environ.get("NCCL_DEBUG_FILE")
        if not pattern:
            level = target.environ.get("NCCL_DEBUG")
            why = "NCCL_DEBUG_FILE not set" + (f" (NCCL_DEBUG={level}: lines go to stdout)" if level else "")
            return CollectorRecord(self.name, Status.SKIPPED, error=why)
        src = find_debug_file(pattern, target.pid)
        if src is None:
            tried = process_path(target.pid, expand_debug_file(pattern, target.pid))
            return CollectorRecord(self.name, Status.FAILED, error=f"{tried}: not found", details={"path": str(tried)})
        path, rel = target.out(f"{collector_folder(self.name, 'nccl-log')}/{Path(src).name}")
        size = apparent_size(src)
        want = options.log_tail_bytes  # the whole tail (the log may grow meanwhile); settle() returns the rest
        granted = target.budget.reserve(want)  # the rank's and the collection's byte caps
        if granted < want and granted <= 0:
            return CollectorRecord(self.name, Status.SKIPPED, error=target.budget.cut(str(src), size, 0),
                                   details={"path": str(src)})
        used = 0
        try:
            used, cut = copy_target_log(target.pid, src, path, granted)
        except UnsafeFile as err:
            return CollectorRecord(self.name, Status.DENIED, error=f"not copied: {err}", details={"path": str(src)})
        except PermissionError as err:
            return CollectorRecord(self.name, Status.DENIED, error=str(err))
        except FileNotFoundError:
            return CollectorRecord(self.name, Status.FAILED, error=f"{src}: not found", details={"path": str(src)})
        finally:
            target.budget.settle(granted, used)
        details = {"path": str(src), "truncated": cut}
        if granted < want:
            details["byte_cap"] = target.budget.cut(str(src), size, granted)
        return CollectorRecord(self.name, Status.OK, files=[rel], details=details)
