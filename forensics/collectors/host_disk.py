"""Disk fullness of every mounted filesystem, through `df` (space and inodes).

`df` runs as a killable child because statfs on a dead network mount blocks
forever; a `df` that hangs is recorded as 'timeout', which itself points at a
stuck NFS or Lustre mount.
"""

from __future__ import annotations

from parsers.model.manifest import CollectorRecord, Status
from parsers.gather.registry import collector_file
from forensics.collect.tool import run_tool
from forensics.collectors.base import AlwaysEnabled, CollectOptions, HostTarget
from forensics.collectors.host_common import save_text

NAME = "disk"
#: each report's file (its name from the registry) and the command that writes it
COMMANDS = ((collector_file(NAME, "df"), ["df", "-P", "-T"]),
            (collector_file(NAME, "df-inodes"), ["df", "-P", "-T", "-i"]))


class DiskCollector(AlwaysEnabled):
    """`df -PT` and `df -PTi` output, raw."""

    name = NAME

    def collect(self, target: HostTarget, options: CollectOptions) -> CollectorRecord:
        files: list[str] = []
        problems: list[str] = []
        for filename, argv in COMMANDS:
            res = run_tool(argv, timeout=min(options.timeout, 15))
            if res.missing:
                return CollectorRecord(self.name, Status.UNAVAILABLE, error="df is not installed")
            if res.timed_out:
                return CollectorRecord(self.name, Status.TIMEOUT,
                                       error=f"{' '.join(argv)} hung for {res.seconds:.0f} s (a stale network mount?)",
                                       files=files)
            if res.stdout and (rel := save_text(target, filename, res.stdout)):
                files.append(rel)
            elif res.stdout:
                problems.append(f"{filename} left out ({target.budget.which()} reached)")
            if res.returncode != 0:
                # df exits 1 when one mount cannot be read but still prints the others.
                problems.append(f"{' '.join(argv)}: exit {res.returncode}: {res.stderr.strip()[:300]}")
        if not files:
            return CollectorRecord(self.name, Status.FAILED, error="; ".join(problems) or "df printed nothing")
        return CollectorRecord(self.name, Status.OK, files=files, error="; ".join(problems) or None)
