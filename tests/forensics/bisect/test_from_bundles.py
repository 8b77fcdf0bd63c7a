"""`bisect --from-bundles` skips an input it cannot read, saying why, and goes on (issue 40 item 5): a bundle with a
1,500-frame stack (the stack tree once overflowed Python's recursion there) is read; an input whose analysis still
overflows is skipped, not the end of the command. Bundles built here."""

from __future__ import annotations

import json

from benchmarks.bundle_scale import write_bundle
from forensics.bisect import from_bundles


def test_a_bundle_with_a_1500_frame_stack_is_read(tmp_path):
    write_bundle(tmp_path, 4, 4, 1)
    man = json.loads((tmp_path / "manifest.json").read_text())
    spy = tmp_path / man["ranks"][1]["dir"] / "pyspy.json"
    threads = json.loads(spy.read_text())
    threads[0]["frames"] = [{"name": f"recurse{i}", "filename": "r.py", "line": i} for i in range(1500)]
    spy.write_text(json.dumps(threads))
    hosts, why = from_bundles.read_one(tmp_path)
    assert why is None or "RecursionError" not in why
    assert set(hosts) <= {"node00000"}


def test_an_input_whose_analysis_overflows_is_skipped(tmp_path, monkeypatch):
    write_bundle(tmp_path, 4, 4, 1)

    def overflow(path):
        raise RecursionError("maximum recursion depth exceeded")

    monkeypatch.setattr(from_bundles, "analyze", overflow)
    hosts, why = from_bundles.read_one(tmp_path)
    assert hosts == {} and why.startswith(f"{tmp_path}: unreadable (RecursionError")
