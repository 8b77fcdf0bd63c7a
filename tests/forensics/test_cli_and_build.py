"""`forensics recorder` (and its first name, `nccl-plugin`) and the build helper, run for real (gcc, subprocess)."""

from __future__ import annotations

import ctypes
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from forensics import recorder_build
from nccl_patches.harness import run_harness

pytestmark = pytest.mark.integration  # builds the plugin with gcc, runs the CLI

REPO = Path(__file__).resolve().parents[2]


def _cli(*args: str, env: dict[str, str] | None = None, command: str = "recorder") -> subprocess.CompletedProcess:
    full = {**os.environ, "PYTHONPATH": str(REPO), **(env or {})}
    return subprocess.run([sys.executable, "-m", "forensics", command, *args], capture_output=True, text=True,
                          env=full, timeout=120)


def test_built_plugin_exports_every_interface(plugin):
    lib = ctypes.CDLL(str(plugin))
    for version in (4, 5, 6):  # NCCL dlsyms ncclProfiler_vN; its first field is the name
        assert ctypes.c_char_p.in_dll(lib, f"ncclProfiler_v{version}").value == b"hang-forensics-recorder"


def test_build_is_keyed_by_sources_and_reused(plugin):
    again = recorder_build.build()
    assert again == plugin and plugin.parent.name == recorder_build.source_hash()


def test_cli_path_and_env(plugin, state_dir):
    out = _cli("path")
    assert out.returncode == 0 and Path(out.stdout.strip()) == plugin
    env = _cli("env", "--dir", str(state_dir))
    assert f"export NCCL_PROFILER_PLUGIN={plugin}" in env.stdout
    assert f"export FORENSICS_RECORDER_DIR={state_dir}" in env.stdout


def test_cli_env_chain_names_the_second_plugin(plugin, state_dir, tmp_path):
    other = tmp_path / "libnccl-profiler-inspector.so"
    other.write_bytes(b"")
    env = _cli("env", "--dir", str(state_dir), "--chain", str(other))
    assert env.returncode == 0
    assert f"export NCCL_PROFILER_PLUGIN={plugin}" in env.stdout  # the recorder keeps NCCL's seat
    assert f"export FORENSICS_RECORDER_CHAIN={other}" in env.stdout
    missing = _cli("env", "--chain", str(tmp_path / "nope.so"))
    assert missing.returncode == 2 and "no such file" in missing.stderr


def test_cli_override_must_exist(tmp_path):
    out = _cli("path", env={"FORENSICS_NCCL_PLUGIN": str(tmp_path / "nope.so")})
    assert out.returncode == 2 and "does not exist" in out.stderr


def test_cli_read_json_and_bad_file(plugin, harness, state_dir, tmp_path):
    env = {"FORENSICS_RECORDER_DIR": str(state_dir), "HARNESS_NO_FINALIZE": "1"}
    assert run_harness(harness, plugin, 5, ["run", "1", "3", "1", "2"], env).returncode == 0
    out = _cli("read", str(state_dir), "--json")
    data = json.loads(out.stdout)
    assert out.returncode == 0 and data["states"][0]["coll_next"] == 3 and data["problems"] == []
    bad = tmp_path / "nccl-recorder.x.1.0.bin"
    bad.write_bytes(b"junk")
    out = _cli("read", str(bad))
    assert out.returncode == 2 and "truncated" in out.stderr and "4 bytes" in out.stderr, out.stderr


def test_the_first_name_nccl_plugin_still_works_and_both_show_in_help(plugin, harness, state_dir):
    """`forensics nccl-plugin` (the command's first name, in scripts and runbooks) is an alias of `recorder`:
    the same answers; the top-level --help lists both names."""
    env = {"FORENSICS_RECORDER_DIR": str(state_dir), "HARNESS_NO_FINALIZE": "1"}
    assert run_harness(harness, plugin, 5, ["run", "1", "3", "1", "2"], env).returncode == 0
    new, old = _cli("read", str(state_dir), "--json"), _cli("read", str(state_dir), "--json", command="nccl-plugin")
    assert new.returncode == old.returncode == 0
    def fixed(text: str) -> list[tuple]:  # what does not move between two reads of a live file (its ages do)
        return [(s["path"], s["pid"], s["rank"], s["coll_next"]) for s in json.loads(text)["states"]]
    assert fixed(new.stdout) == fixed(old.stdout) != []
    assert _cli("path", command="nccl-plugin").stdout == _cli("path").stdout
    top = subprocess.run([sys.executable, "-m", "forensics", "--help"], capture_output=True, text=True,
                         env={**os.environ, "PYTHONPATH": str(REPO), "COLUMNS": "200"}, timeout=60).stdout
    assert re.search(r"^\s+recorder \(nccl-plugin\)\s", top, re.M), top
