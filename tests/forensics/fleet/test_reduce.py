"""Tree mode's reduction (forensics.fleet.reduce): each gateway folds its hosts' digests into one merged
digest, run as the gateway runs it (a real `python -m forensics.fleet.reduce` process); the root merges the
gateways' answers to the same merged digest, and the same class judgement, as one flat merge of every host."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from hf_testpaths import FIXTURES
from forensics.bundle.merge import HostPart, merge_bundles
from forensics.fleet.reduce import merge_answers, read_answer
from parsers import digest_merge, knowledge
from parsers.digest import DIGEST_NAME, write_json
from parsers.digest_classes import judge_classes
from parsers.digest_first import digest_host
from parsers.source import open_source

KB = knowledge.load(use_env=False)
REPO = Path(__file__).resolve().parents[3]
HOSTS = [FIXTURES / "nccl" / "sleep" / "bundle", FIXTURES / "gloo14" / "oom" / "live",
         FIXTURES / "gloo14" / "busy" / "live", FIXTURES / "nccl" / "kill" / "bundle"]


def _host_bundle(src_bundle: Path, dst: Path) -> Path:
    shutil.copytree(src_bundle, dst, symlinks=True)
    with open_source(dst) as src:
        for rec in src.manifest.hosts:
            (dst / rec.dir / DIGEST_NAME).write_bytes(write_json(digest_host(src, rec.host, KB)))
    return dst


def _gateway(tmp_path: Path, name: str, hosts: list[tuple[str, Path]]) -> str:
    """A gateway's job bundle of its hosts' answers, reduced by the real command: its stdout, as sent up."""
    parts = [HostPart(host=h, bundle=_host_bundle(b, tmp_path / f"{name}-{h}")) for h, b in hosts]
    merge_bundles(tmp_path / name, parts)
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")]))
    done = subprocess.run([sys.executable, "-m", "forensics.fleet.reduce", str(tmp_path / name)], capture_output=True,
                          text=True, env=env, timeout=120, check=True)
    return done.stdout


def test_gateways_reduce_and_the_root_merges_to_the_flat_merge(tmp_path):
    named = [(f"h{i}", b) for i, b in enumerate(HOSTS)]
    answers = [_gateway(tmp_path, "gw0", named[:2]), _gateway(tmp_path, "gw1", named[2:])]
    root, bad = merge_answers(answers)
    assert not bad
    flat = digest_merge.merge_all(
        digest_merge.from_host(dict(json.loads((tmp_path / f"gw{i // 2}-{h}" / rec_dir / DIGEST_NAME).read_text()), host=h))
        for i, (h, _) in enumerate(named) for rec_dir in _dirs(tmp_path / f"gw{i // 2}-{h}"))
    assert root == flat and root["hosts"] == 4 and root["ranks"] > 8
    assert sum(len(a) for a in answers) < sum(len(json.dumps(digest_merge.from_host(json.loads(p.read_text()))))
                                              for p in tmp_path.glob(f"gw?-*/hosts/*/{DIGEST_NAME}"))
    assert judge_classes(root).complete


def _dirs(bundle: Path) -> list[str]:
    with open_source(bundle) as src:
        return [rec.dir for rec in src.manifest.hosts]


def test_a_host_without_a_digest_makes_the_root_judge_rank_by_rank(tmp_path):
    answer = _gateway(tmp_path, "gw0", [("h0", HOSTS[0])])
    assert judge_classes(read_answer(answer)).complete
    for p in (tmp_path / "gw0" / "hosts").rglob(DIGEST_NAME):
        p.unlink()
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")]))
    out = subprocess.run([sys.executable, "-m", "forensics.fleet.reduce", str(tmp_path / "gw0")], capture_output=True,
                         text=True, env=env, timeout=120, check=True).stdout
    doc = read_answer(out)
    assert doc["dropped"] == 1 and not judge_classes(doc).complete


@pytest.mark.parametrize("bad, why", [
    ("{", "not JSON"), ('{"format": "x"}', "not a hang-forensics-merged-digest"),
    (json.dumps(dict(digest_merge.empty(), flags={"frozen": [[5, 1]]})), "sorted"),
    (json.dumps(dict(digest_merge.empty(), ranks=-1)), "count"),
    (json.dumps(dict(digest_merge.empty(), stacks={"k": {"kind": 1, "ranks": []}})), "stack class"),
])
def test_a_bad_answer_is_refused_with_its_reason(bad, why):
    with pytest.raises(ValueError, match=why):
        read_answer(bad)
    root, refused = merge_answers([bad])
    assert root["hosts"] == 0 and refused and why in refused[0]
