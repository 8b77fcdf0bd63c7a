"""Copies `nvidia-smi -q`, `nvidia-smi -q -x` and `nvidia-smi topo -m` output.

nvidia-smi is the one GPU tool present wherever the driver is. On a GPU in
trouble it can hang for minutes or fail to reach the driver; both are recorded
(status 'timeout' or 'failed' plus whatever it printed), because a hanging
nvidia-smi is itself evidence against the host.
"""

from __future__ import annotations

from parsers.model.manifest import CollectorRecord, Status
from parsers.gather.registry import collector_file
from forensics.collect.tool import ToolResult, run_tool
from forensics.collectors.base import AlwaysEnabled, CollectOptions, HostTarget
from forensics.collectors.host_common import save_text, save_whole

NAME = "nvidia_smi"
#: each report's file (its name from the registry) and the command that writes it
COMMANDS = (
    (collector_file(NAME, "nvidia-smi-text"), ["nvidia-smi", "-q"]),
    (collector_file(NAME, "nvidia-smi-xml"), ["nvidia-smi", "-q", "-x"]),
    (collector_file(NAME, "nvidia-smi-topo"), ["nvidia-smi", "topo", "-m"]),
)


def _save(target: HostTarget, filename: str, text: str, files: list[str], run: dict) -> None:
    """One report within the host's bytes left: the XML whole or not at all (cut XML is unreadable), the text
    reports cut at a line boundary; what did not fit is said in the run's entry and the manifest's note."""
    rel = save_whole(target, filename, text) if filename.endswith(".xml") else save_text(target, filename, text)
    if rel:
        files.append(rel)
    else:
        run["left_out"] = f"{filename} left out ({target.budget.which()} reached)"


class NvidiaSmiCollector(AlwaysEnabled):
    """Raw nvidia-smi reports of every GPU on the host."""

    name = NAME

    def collect(self, target: HostTarget, options: CollectOptions) -> CollectorRecord:
        files: list[str] = []
        runs: dict[str, dict] = {}
        first: ToolResult | None = None
        for filename, argv in COMMANDS:
            res = run_tool(argv, timeout=min(options.timeout, 30))
            if res.missing:
                return CollectorRecord(self.name, Status.SKIPPED,
                                       error="nvidia-smi is not installed: no NVIDIA driver on this host, "
                                             "nothing to collect")
            first = first or res
            runs[" ".join(argv)] = {"returncode": res.returncode, "seconds": round(res.seconds, 3),
                                    "timed_out": res.timed_out, "stderr": res.stderr[-2000:]}
            if res.stdout or res.stderr:
                _save(target, filename, res.stdout if res.stdout else res.stderr, files, runs[" ".join(argv)])
            if res.timed_out:
                # A hung nvidia-smi will hang again; do not spend two more timeouts on it.
                return CollectorRecord(self.name, Status.TIMEOUT,
                                       error=f"{' '.join(argv)} did not finish in {res.seconds:.0f} s (GPU "
                                             f"or driver hung?)", files=files, details={"runs": runs})
        assert first is not None
        if not first.ok:
            msg = (first.stdout.strip() or first.stderr.strip() or f"exit {first.returncode}").splitlines()[0]
            return CollectorRecord(self.name, Status.FAILED, error=f"nvidia-smi -q failed: {msg}", files=files,
                                   details={"runs": runs})
        return CollectorRecord(self.name, Status.OK, files=files, details={"runs": runs})
