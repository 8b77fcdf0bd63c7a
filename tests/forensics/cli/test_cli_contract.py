"""The contract for people and scripts (issue 17), checked by running the real CLI on real fixtures.

Exit codes (one table in docs/exit-codes.md, each --help its own), JSON envelopes
validated against the schemas the package ships, a short verdict block over a folded
stack tree, -o/--output, -v logging, a closed stdout, and no temp folders left behind.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

from hf_testpaths import FIXTURES, REPO

jsonschema = pytest.importorskip("jsonschema")

pytestmark = pytest.mark.integration
SIGSTOP_BUNDLE = FIXTURES / "nccl" / "sigstop" / "bundle"
COMMANDS = ["analyze", "bisect", "collect", "demo", "env", "hosts", "ras", "recorder", "report", "steps"]


def cli(*args: str, env: dict | None = None, timeout: float = 120,
        cwd: Path | None = None) -> subprocess.CompletedProcess:
    full = dict(os.environ, PYTHONPATH=str(REPO), COLUMNS="100", **(env or {}))
    return subprocess.run([sys.executable, "-m", "forensics", *args], capture_output=True, text=True, env=full,
                          timeout=timeout, cwd=cwd)


def validate(kind: str, text: str) -> dict:
    """Parse one JSON output and check it against the schema the package ships for its kind."""
    from forensics.schemas import load

    data = json.loads(text)
    assert data["schema"] == f"hang-forensics/{kind}/1"
    jsonschema.validate(data, load(kind))
    return data


# --- item 1: concise analyze -----------------------------------------------------------

def test_analyze_prints_the_verdict_block_first_and_a_folded_tree():
    done = cli("analyze", str(SIGSTOP_BUNDLE))
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert lines[0].startswith("VERDICT: rank 3 ")
    block = lines[: next(i for i, line in enumerate(lines) if line.startswith("ranks by what"))]
    assert len(block) <= 12, block
    assert len(lines) < 80  # was 258: one branch per rank
    assert "  [0-2,4-7] ?? [libc.so.6]" in lines  # eight different load addresses folded into one frame
    # no load address (a communicator id, in 'where each rank's logs stop (... communicator 0x...)', is a name)
    assert not any(re.search(r"0x[0-9a-f]{8,}", line) for line in lines if "communicator 0x" not in line)
    # no filler suspects: the waiters of the stopped rank form a wait cycle, which the culprit explains
    assert "other suspects:" not in block
    data = json.loads(cli("analyze", "--json", str(SIGSTOP_BUNDLE)).stdout)
    assert [(s["rank"], s["reason_class"]) for s in data["suspects"]] == [(3, "stopped")]  # the cycle is no suspect...
    assert any("[wait-cycle]" in c for c in data["consequences"])  # ...but a consequence of the culprit

    assert max(len(line) for line in lines) > 100  # a pipe: nothing cut, whatever COLUMNS says (issue 27)
    fitted = cli("analyze", "--width", "100", str(SIGSTOP_BUNDLE)).stdout
    assert max(len(line) for line in fitted.splitlines()) <= 100  # --width N: fitted (the VERDICT wraps)


def test_analyze_json_is_compact_valid_and_folds_like_the_text():
    done = cli("analyze", "--json", str(SIGSTOP_BUNDLE))
    assert done.returncode == 0
    assert "\n" not in done.stdout.strip()  # compact by default
    assert len(done.stdout) < 60_000  # 199 KB before the frames were folded
    data = validate("analyze", done.stdout)
    tree = data["sections"]["stack_tree"]
    assert [c["ranks"] for c in tree["children"]] == [[0, 1, 2, 4, 5, 6, 7]]
    assert tree["children"][0]["frame"] == "?? [libc.so.6]"
    pretty = cli("analyze", "--json", "--pretty", str(SIGSTOP_BUNDLE)).stdout
    assert json.loads(pretty) == data and pretty.count("\n") > 100


def test_analyze_of_a_large_bundle_over_its_classes_every_rank_or_no_digest(tmp_path: Path):
    """1,024 ranks (benchmarks/bundle_scale.py's job) with each host's digest: by default two hosts give evidence
    (the odd rank's and one for the class of the many) and the text counts every rank; `--every-rank` builds
    every rank's evidence from the digests; `--no-digests` reads every raw file. One first suspect for all three."""
    from benchmarks.bundle_scale import write_bundle
    from parsers import knowledge
    from parsers.scale.digest import DIGEST_NAME, write_json
    from parsers.scale.digest_first import digest_host
    from parsers.gather.source import open_source

    write_bundle(tmp_path, 1024, 8, 700)
    kb = knowledge.load(use_env=False)
    with open_source(tmp_path) as src:
        for rec in src.manifest.hosts:
            (tmp_path / rec.dir / DIGEST_NAME).write_bytes(write_json(digest_host(src, rec.host, kb)))
    runs = {flag: cli("analyze", "--json", str(tmp_path),
                      *([flag] if flag else [])) for flag in ("", "--every-rank", "--no-digests")}
    docs = {flag: validate("analyze", done.stdout) for flag, done in runs.items()}
    assert {d["suspects"][0]["rank"] for d in docs.values()} == {700}
    focus = docs[""]["sections"]["digests"]["focus"]
    assert focus["hosts_read"] == 2 and focus["ranks_judged_from_classes"] == 1024 - 16
    assert docs["--every-rank"]["sections"]["digests"]["focus"] == {"why_not": "every rank's evidence asked for"}
    assert "digests" not in docs["--no-digests"]["sections"]
    text = cli("analyze", "--width", "0", str(tmp_path)).stdout
    # wording is the behaviour: every rank counted in the classes, the stack tree said to cover the ranks read
    assert "[0-699,701-1023] wait in all_reduce" in text and "the 16 ranks read on 2 host(s)" in text


def test_analyze_of_a_loose_folder_and_an_archive(tmp_path: Path):
    from forensics.bundle.archive import make_archive

    loose = FIXTURES / "nccl" / "sigstop"
    folder = tmp_path / "loose"
    folder.mkdir()
    for node in sorted(loose.glob("node0*")):  # copies: the loader follows no links
        shutil.copytree(node, folder / node.name)
    done = cli("analyze", "--json", str(folder))
    assert validate("analyze", done.stdout)["culprit"]["rank"] == 3
    archive = make_archive(SIGSTOP_BUNDLE, tmp_path / "sig.tar.gz")
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    done = cli("analyze", str(archive), env={"TMPDIR": str(tmp)})
    assert done.returncode == 0 and done.stdout.startswith("VERDICT: rank 3 ")
    assert list(tmp.iterdir()) == []  # the unpacked archive is gone


# --- item 3: exit codes ------------------------------------------------------------------

def test_every_help_shows_its_own_exit_codes_and_the_doc_holds_them_all():
    from forensics.cli.main import _command_modules

    doc = (REPO / "docs" / "exit-codes.md").read_text()
    modules = {m.NAME: m for m in _command_modules()}
    assert sorted(modules) == COMMANDS
    for name, module in modules.items():
        help_text = cli(name, "--help").stdout
        # wording is the behaviour: the help text's heading
        assert f"exit codes of 'forensics {name}'" in help_text
        codes = module.EXIT_CODES
        for code, meaning in codes.items():
            assert re.search(rf"^\s+{code}\s+{re.escape(meaning[:30])}", help_text, re.M), (name, code)
            assert re.search(rf"^\| `{name}` \| {code} \|", doc, re.M), f"docs/exit-codes.md lacks {name} {code}"
        # wording is the behaviour: the help text must not say this
        assert "4 at least one host" not in help_text
    hosts_help = cli("hosts", "--help").stdout
    assert not re.search(r"^\s+4\s", hosts_help, re.M)  # 4 means 'nothing to blame' only


def test_bisect_that_convicts_exits_5_with_an_exclude_list(tmp_path: Path):
    """A real local bisection: the test job fails whenever its group holds n05."""
    test = f"{sys.executable} -c \"import sys; sys.exit(1 if 'n05' in sys.argv[1].split(',') else 0)\" {{hosts}}"
    done = cli("bisect", "--hosts", "n[01-09]", "--launcher", "local", "--test", test, "--flake-rate", "0.001",
               "--state", str(tmp_path / "state.json"), "--json", timeout=240)
    assert done.returncode == 5, done.stderr
    rep = validate("bisect", done.stdout)
    assert rep["exclude_list"] == "n05" and [b["unit"] for b in rep["bad"]] == ["n05"]
    assert rep["job_count"] == len([j for j in rep["jobs"] if j["status"] in ("pass", "fail", "hang")])
    assert "[bisect] round 1" in done.stderr  # the per-job log stays on stderr, stdout is only the JSON
    text = cli("bisect", "--hosts", "n[01-09]", "--launcher", "local", "--test", test, "--flake-rate", "0.001",
               "--state", str(tmp_path / "state.json"), timeout=120)  # resumed: the same command line
    assert text.returncode == 5 and "exclude: n05" in text.stdout


def test_bisect_simulation_json():
    done = cli("bisect", "--hosts", "n[01-24]", "--simulate", "--sim-bad", "1", "--trials", "2", "--json")
    assert done.returncode == 0
    validate("bisect-simulation", done.stdout)


# --- item 4: JSON of the other commands -----------------------------------------------------

def test_env_steps_and_recorder_json(tmp_path: Path):
    data = validate("env", cli("env", "--json", "--dir", str(tmp_path)).stdout)
    assert any(v["name"] == "NCCL_DEBUG_FILE" for v in data["variables"])
    rows = {v["name"]: v["value"] for v in validate("env", cli("env", "--json", "--recorder", "--dir",
                                                               str(tmp_path)).stdout)["variables"]}
    assert Path(rows["NCCL_PROFILER_PLUGIN"]).is_file() and rows["TORCH_NCCL_ENABLE_TIMING"] == "1"

    times = []
    for step in range(40):  # real step times of a real loop; every 10th step does ten times the work
        start = time.perf_counter()
        sum(i * i for i in range(20_000 * (10 if step % 10 == 9 else 1)))
        times.append(time.perf_counter() - start)
    series = tmp_path / "steps.txt"
    series.write_text("\n".join(f"{t:.6f}" for t in times) + "\n")
    done = cli("steps", "--json", str(series))
    assert done.returncode == 0, done.stderr
    validate("steps", done.stdout)

    states = sorted((FIXTURES / "nccl_x2" / "mixed" / "kill" / "bundle").rglob("nccl-recorder.*.bin"))
    done = cli("recorder", "read", *map(str, states), "--json")
    assert done.returncode == 0, done.stderr
    assert validate("nccl-plugin-read", done.stdout)["states"]


def test_collect_json_of_a_real_process(tmp_path: Path):
    env = dict(os.environ, RANK="0", WORLD_SIZE="1", LOCAL_RANK="0")
    target = subprocess.Popen([sys.executable, "-c", "import time\nwhile True: time.sleep(0.2)"], env=env,
                              start_new_session=True)
    try:
        time.sleep(0.5)
        done = cli("collect", "--pid", str(target.pid), "-o", str(tmp_path / "b"), "--json", timeout=120)
        assert done.returncode in (0, 3), done.stderr
        data = validate("collect", done.stdout)
        assert data["mode"] == "local" and data["ranks"] == 1 and data["exit_code"] == done.returncode
        assert "[1/1" not in done.stderr  # progress lines only on a terminal
        loud = cli("-v", "collect", "--pid", str(target.pid), "-o", str(tmp_path / "c"), timeout=120)
        assert "INFO" in loud.stderr and "collect: into" in loud.stderr  # -v: loguru on stderr
        assert "[1/1" in loud.stderr
        assert "INFO" not in loud.stdout
    finally:
        os.killpg(target.pid, signal.SIGKILL)
        target.wait(timeout=10)


# --- item 5: Unix manners -----------------------------------------------------------------------

@pytest.mark.parametrize("args", [["env"], ["hosts", str(SIGSTOP_BUNDLE)],
                                  ["analyze", "--width", "0", str(SIGSTOP_BUNDLE)]])
def test_a_closed_stdout_is_no_traceback(args: list[str]):
    read, write = os.pipe()
    os.close(read)  # the reader is gone before the first byte, as with `| head -0`
    proc = subprocess.run([sys.executable, "-m", "forensics", *args], stdout=write, stderr=subprocess.PIPE, text=True,
                          env=dict(os.environ, PYTHONPATH=str(REPO)), timeout=120)
    os.close(write)
    assert "Traceback" not in proc.stderr and "BrokenPipe" not in proc.stderr, proc.stderr
    assert proc.returncode == 141


def test_head_on_a_pipe_is_quiet():
    shell = (f"PYTHONPATH={REPO} {sys.executable} -m forensics hosts {SIGSTOP_BUNDLE} | head -1;"
             f"PYTHONPATH={REPO} {sys.executable} -m forensics analyze --width 0 {SIGSTOP_BUNDLE} | head -1")
    done = subprocess.run(["bash", "-c", shell], capture_output=True, text=True, timeout=120)
    assert "Traceback" not in done.stderr, done.stderr
    assert done.stdout.splitlines()[1].startswith("VERDICT: ")


def test_output_option_writes_files(tmp_path: Path):
    out = tmp_path / "sub" / "verdict.json"
    done = cli("analyze", "--json", "-o", str(out), str(SIGSTOP_BUNDLE))
    assert done.returncode == 0 and done.stdout == ""
    validate("analyze", out.read_text())
    text = tmp_path / "hosts.txt"
    assert cli("hosts", str(SIGSTOP_BUNDLE), "-o", str(text)).stdout == ""
    # a header row (issue 27)
    assert text.read_text().splitlines()[:2] == ["HOST  STATUS    ACTION", "vm    healthy   -"]
    env_file = tmp_path / "job.env"
    cli("env", "-o", str(env_file))
    assert "export NCCL_DEBUG_FILE=" in env_file.read_text()
    assert not list(tmp_path.glob("**/.*.tmp"))


def test_no_temp_folder_is_left_behind(tmp_path: Path):
    from forensics.bundle.archive import make_archive

    archive = make_archive(SIGSTOP_BUNDLE, tmp_path / "b.tar.gz")
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    for args in (["hosts", str(archive)], ["report", str(archive), "-o", str(tmp_path / "r.html")],
                 ["analyze", "--json", str(archive)]):
        done = cli(*args, env={"TMPDIR": str(tmp)})
        assert done.returncode in (0, 4), done.stderr
    assert list(tmp.iterdir()) == []
    assert tempfile.gettempdir() != str(tmp)
