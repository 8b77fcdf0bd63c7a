"""A real collection of a hung gloo job writes only file names the registry declares (issue 29, item 4)."""

from __future__ import annotations

import pytest

from forensics.bundle.writer import BundleWriter
from forensics.collect.local import collect_local
from forensics.collectors.base import CollectOptions
from parsers.gather import registry

pytestmark = pytest.mark.integration


def test_a_live_collection_writes_only_declared_names(hung_job, tmp_path):
    job = hung_job("sleep", ranks=2, culprit=1)
    out = tmp_path / "b"
    result = collect_local(out, CollectOptions(gdb=True, samples=2, sample_interval=0.05), pids=job.alive_pids(),
                           quiet=True, writer=BundleWriter(out))
    man = result.writer.manifest
    written = [(c.name, rel) for r in man.ranks for c in r.collectors for rel in c.files]
    written += [(c.name, rel) for r in man.ranks for kid in r.children for c in kid.collectors for rel in c.files]
    written += [(c.name, rel) for h in man.hosts for c in h.collectors for rel in c.files]
    assert [w for w in written if not registry.declares(*w)] == []
    wrote = {name for name, _ in written}
    # the check saw real files of the rank collectors a gloo job gives, and of the host's
    assert {"process_state", "environment", "stdio", "py-spy", "py-spy-samples", "gdb"} <= wrote, wrote
    assert wrote & {"kernel_log", "cpufreq", "memory", "disk"}, wrote
    assert all((out / rel).is_file() for _, rel in written)
