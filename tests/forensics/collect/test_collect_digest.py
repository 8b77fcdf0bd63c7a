"""collect writes its host's digest beside the raw files (issue 30), and analyze reads it first."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time

import pytest

from forensics.collect.local import collect_local
from forensics.collectors.base import CollectOptions
from parsers import knowledge
from forensics.report.words import analyze
from parsers.scale.digest import DIGEST_NAME, VERSION, read_digest

pytestmark = pytest.mark.integration


def test_collect_writes_a_digest_that_analysis_reads_first(tmp_path):
    env = dict(os.environ, RANK="0", WORLD_SIZE="1", LOCAL_WORLD_SIZE="1")
    target = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"], env=env)
    try:
        time.sleep(0.3)
        result = collect_local(tmp_path / "b", CollectOptions(), pids=[target.pid], quiet=True)
    finally:
        target.kill()
        target.wait()
    man = result.writer.manifest
    host = man.hosts[0]
    path = tmp_path / "b" / host.dir / DIGEST_NAME
    dig = read_digest(path)
    assert dig.host == host.host and [r.pid for r in dig.ranks] == [target.pid]
    assert dig.ranks[0].state and dig.ranks[0].kind
    assert "proc.json" in " ".join(dig.files)
    assert not any("digest" in n for n in man.notes)
    kb = knowledge.load(use_env=False)
    first = analyze(tmp_path / "b", kb)
    full = analyze(tmp_path / "b", kb, digests=False)
    assert first.verdict.sections["digests"]["hosts_from_digest"] == 1
    assert first.verdict.summary == full.verdict.summary
    assert json.loads(path.read_text())["version"] == VERSION
