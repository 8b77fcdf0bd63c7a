"""A real gloo job spread over simulated hosts: each rank carries FORENSICS_SIM_HOST=<address>.

All "hosts" are this machine, so the collector on host X is told (--match-env
FORENSICS_SIM_HOST={host}) to take only the ranks marked X. On a real cluster each
host only sees its own processes and no such filter is needed.
"""

from __future__ import annotations

from pathlib import Path

from forensics.demo.launcher import DemoJob, start_job, stop_job, wait_for_hang  # noqa: F401

REPO = Path(__file__).resolve().parents[2]


def start_sim_job(run_dir: Path, hosts: list[str], ranks_per_host: int, culprit: int, port: int, fault: str = "sleep",
                  pg_timeout: float = 600.0) -> DemoJob:
    """Start len(hosts) x ranks_per_host ranks of forensics.demo.job; rank r lives on hosts[r // ranks_per_host]."""
    return start_job(
        run_dir, len(hosts) * ranks_per_host, fault, culprit, pg_timeout=pg_timeout, ranks_per_host=ranks_per_host,
        port=port, run_id="fleet",
        rank_env=lambda rank: {"FORENSICS_SIM_HOST": hosts[rank // ranks_per_host], "PYTHONPATH": str(REPO)},
    )
