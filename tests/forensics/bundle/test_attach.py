"""collect --attach: the caller's files join the bundle, bounded and confined; bad ones are problems, not crashes."""

from __future__ import annotations

import json
import os

from forensics.bundle import attach
from forensics.bundle.writer import BundleWriter
from parsers.gather.evidence import load_path


def _bundle(tmp_path):
    writer = BundleWriter(tmp_path / "bundle", command=["test"])
    writer.save()
    return writer.root


def test_attached_step_series_is_listed_and_read_with_its_rank(tmp_path):
    root = _bundle(tmp_path)
    series = tmp_path / "steps-rank9.csv"  # the file name says 9; the content says 3: content wins
    series.write_text("step,seconds,end_unix_time,collective_seconds,first_enter_unix,rank\n"
                      + "".join(f"{i},0.5,,0.1,{1_800_000_000 + i / 2:.6f},3\n" for i in range(10)))
    assert attach.attach_files(root, [series], host="node07") == []
    manifest = json.loads((root / "manifest.json").read_text())
    assert manifest["artifacts"] == [{"kind": "attached", "path": "job/attached/steps-rank9.csv", "host": "node07",
                                      "rank": None}]
    ev = load_path(root)
    assert set(ev.step_series) == {3} and ev.step_series[3].steps == list(range(10))


def test_links_dirs_missing_and_oversized_files_are_problems(tmp_path, monkeypatch):
    root = _bundle(tmp_path)
    secret = tmp_path / "secret"
    secret.write_text("root only\n")
    link = tmp_path / "link.csv"
    os.symlink(secret, link)
    big = tmp_path / "big.log"
    big.write_bytes(b"a" * 100 + b"TAIL\n")
    monkeypatch.setattr(attach, "MAX_BYTES", 16)
    problems = attach.attach_files(root, [link, tmp_path, tmp_path / "nope", big, big])
    assert len(problems) == 5, problems  # link, folder, missing: not attached; big twice: cut
    assert sum("not attached" in p for p in problems) == 3
    assert sum("last 0 MiB" in p or "larger" in p for p in problems) == 2
    attached = sorted(p.name for p in (root / "job" / "attached").iterdir())
    assert attached == ["2.big.log", "big.log"]  # same base name: both kept
    assert (root / "job" / "attached" / "big.log").read_bytes().endswith(b"TAIL\n")  # the tail is what is kept
    assert not any("root only" in p.read_text() for p in (root / "job" / "attached").iterdir())
