"""Item 8 of issue 31 (and of issue 40) end to end: a real `forensics collect` of a real process that carries
every planted secret of the redaction corpus (tests/fixtures/redaction/corpus.json, 180 shapes) in its
environment, its argv, its stdout and stderr files and its NCCL_DEBUG_FILE log; then the
whole bundle, every file, is searched for every planted value, and so is every output made from it
(collect's own summary and --json, analyze text and --json, hosts, report's HTML).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

pytestmark = pytest.mark.integration  # it starts real processes (it was under tests/integration)

ROOT = Path(__file__).resolve().parents[3]
CORPUS = json.loads((ROOT / "tests" / "fixtures" / "redaction" / "corpus.json").read_text())

TARGET = """
import json, sys, time
plan = json.load(open(sys.argv[1]))
print(plan["stdout"], flush=True)
print(plan["stderr"], file=sys.stderr, flush=True)
with open(plan["nccl_file"], "a") as log:
    log.write(plan["nccl"] + "\\n")
print("ready", flush=True)
time.sleep(120)
"""


def _by_channel(*channels: str) -> list[dict]:
    return [e for e in CORPUS if e["channel"] in channels]


@pytest.fixture
def planted_target(tmp_path):
    """A sleeping Python process holding every corpus secret where its channel says."""
    nccl_file = tmp_path / "nccl.log"
    plan = {"stdout": "\n".join(e["input"] for e in _by_channel("stdout")),
            "stderr": "\n".join(e["input"] for e in _by_channel("stderr")),
            "nccl": "\n".join(e["input"] for e in _by_channel("nccl")), "nccl_file": str(nccl_file)}
    (tmp_path / "plan.json").write_text(json.dumps(plan))
    env = {"PATH": os.environ["PATH"], "RANK": "0", "WORLD_SIZE": "1", "LOCAL_RANK": "0", "NCCL_DEBUG": "INFO",
           "NCCL_DEBUG_FILE": str(nccl_file)}
    for entry in _by_channel("env"):
        env.update(entry["input"])
    argv = [arg for entry in _by_channel("argv") for arg in entry["input"]]
    out, err = tmp_path / "rank0.out", tmp_path / "rank0.err"
    with open(out, "w") as so, open(err, "w") as se:
        proc = subprocess.Popen([sys.executable, "-c", TARGET, str(tmp_path / "plan.json"), *argv], env=env,
                                stdout=so, stderr=se, cwd=tmp_path)
    deadline = time.monotonic() + 20
    while "ready" not in out.read_text():
        assert time.monotonic() < deadline and proc.poll() is None, err.read_text()
        time.sleep(0.05)
    yield proc
    proc.kill()
    proc.wait()


def test_no_planted_secret_reaches_the_bundle(planted_target, tmp_path):
    out = tmp_path / "bundle"
    done = subprocess.run([sys.executable, "-m", "forensics", "collect", "--pid", str(planted_target.pid), "-o",
                           str(out),
                           "-q", "--timeout", "10"], capture_output=True, text=True, timeout=120,
                          env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert done.returncode in (0, 3), done.stderr
    files = [p for p in out.rglob("*") if p.is_file()]
    text = "\n".join(p.read_text(errors="replace") for p in files)
    names = {p.name for p in files}
    # the channels were really collected (else the search below could not fail)
    assert "environ.json" in names and "nccl.log" in names, sorted(names)
    assert any(n.endswith(".log") and "std" in n or n.startswith("stdout") for n in names), sorted(names)
    assert "Init COMPLETE" in text and "step 10 loss 1.2" in text and "<redacted>" in text
    man = json.loads((out / "manifest.json").read_text())
    assert any("sshpass" in arg for arg in man["ranks"][0]["cmdline"])
    assert not _leaked(text)
    outputs = [done.stdout, done.stderr]
    for argv in (["analyze", str(out)], ["analyze", str(out), "--json"], ["hosts", str(out), "--json"],
                 ["report", str(out), "-o", str(tmp_path / "r.html")]):
        run = subprocess.run([sys.executable, "-m", "forensics", *argv], capture_output=True, text=True, timeout=180,
                             env={**os.environ, "PYTHONPATH": str(ROOT)})
        assert run.returncode in (0, 3, 4), (argv, run.stderr)
        outputs += [run.stdout, run.stderr]
    outputs.append((tmp_path / "r.html").read_text())
    assert "VERDICT" in outputs[2] and outputs[4].startswith("{")  # the outputs were made (else no leak could show)
    assert not _leaked("\n".join(outputs))


def _leaked(text: str) -> list[tuple[str, str]]:
    """(shape, value) of every planted secret found in `text`, as written or JSON-escaped."""
    return [(e["name"], s) for e in CORPUS for s in e["secrets"] if s in text or json.dumps(s)[1:-1] in text]
