"""The LD_PRELOAD shim over a stand-in libnccl (real signatures, no GPU) and a stand-in
CUDA driver whose events can be told never to complete.

This proves the shim's forwarding, records and completion polling on CPU; it is
not yet proven on a real NCCL < 2.23 (no such GPU job runs in CI).
"""

from __future__ import annotations

import os
import subprocess
import time
from pathlib import Path

import pytest

from forensics import recorder_build
from nccl_patches.harness import HERE
from parsers.readers.recorder import read_recorder_dir
from parsers.judges.recorder import analyse, stalled_ranks

pytestmark = pytest.mark.integration
TESTS = HERE / "tests"


@pytest.fixture(scope="module")
def built(tmp_path_factory) -> dict[str, Path]:
    d = tmp_path_factory.mktemp("shim")
    run = lambda *cmd: subprocess.run(cmd, check=True, capture_output=True, timeout=120)  # noqa: E731
    run("gcc", "-shared", "-fPIC", "-O1", str(TESTS / "fake_nccl.c"), "-o", str(d / "libnccl.so.2"),
        "-Wl,-soname,libnccl.so.2")
    (d / "libnccl.so").symlink_to("libnccl.so.2")
    run("gcc", "-shared", "-fPIC", str(TESTS / "fake_cuda.c"), "-o", str(d / "libfakecuda.so"))
    run("gcc", str(TESTS / "shim_app.c"), f"-L{d}", "-lnccl", f"-Wl,-rpath,{d}", "-o", str(d / "shim_app"))
    # the same application as a library that a loader dlopens RTLD_LOCAL, as Python loads torch
    run("gcc", "-shared", "-fPIC", "-Dmain=app_main", str(TESTS / "shim_app.c"), f"-L{d}", "-lnccl",
        f"-Wl,-rpath,{d}", "-o", str(d / "libshimapp.so"))
    run("gcc", str(TESTS / "local_loader.c"), "-ldl", "-o", str(d / "local_loader"))
    return {"app": d / "shim_app", "cuda": d / "libfakecuda.so",
            "shim": recorder_build.build(recorder_build.PRELOAD_NAME),
            "loader": d / "local_loader", "applib": d / "libshimapp.so"}


def _env(built, state_dir: Path, **extra: str) -> dict[str, str]:
    return {**os.environ, "LD_PRELOAD": str(built["shim"]), "FORENSICS_RECORDER_DIR": str(state_dir),
            "FORENSICS_RECORDER_CUDA_LIB": str(built["cuda"]), "FORENSICS_RECORDER_HEARTBEAT_MS": "50", **extra}


def test_records_every_call_and_its_completion(built, state_dir):
    env = _env(built, state_dir, FORENSICS_RECORDER_KEEP="1", FAKE_CUDA_HANG_FROM="5")
    done = subprocess.run([str(built["app"]), "1", "4", "8", "exit"], env=env, capture_output=True, text=True,
                          timeout=60)
    assert done.returncode == 0 and "DONE" in done.stdout, done.stderr
    states, problems = read_recorder_dir(state_dir)
    assert problems == [] and len(states) == 2
    world = next(s for s in states if s.comm_index == 0)
    split = next(s for s in states if s.comm_index == 1)
    assert world.writer == "preload-shim" and world.abi_version == 21805  # ncclGetVersion of the stand-in
    assert (world.rank, world.nranks, world.comm_state) == (1, 4, "finalized")
    labels = [(c.kind, c.label, c.state) for c in world.colls]
    assert labels[:5] == [("coll", f"AllReduce seq {i}", "complete") for i in range(5)]
    assert labels[5:8] == [("coll", f"AllReduce seq {i}", "in-flight") for i in range(5, 8)]
    # grouped p2p: enqueued (event recorded) only at ncclGroupEnd
    assert [(c.func, c.root_or_peer, c.state) for c in world.colls[8:]] == [("Send", 2, "in-flight"),
                                                                            ("Recv", 0, "in-flight")]
    assert [(c.func, c.dtype, c.count) for c in split.colls] == [("AllGather", "ncclBfloat16", 64)]
    assert world.colls[0].dtype == "ncclFloat32" and world.colls[0].count == 1 << 20


def test_names_the_rank_that_never_entered(built, state_dir):
    procs = []
    try:
        for r in range(4):
            n = 3 if r == 2 else 5  # rank 2 stops calling all_reduce after 3
            p = subprocess.Popen([str(built["app"]), str(r), "4", str(n), "hang"], stdout=subprocess.PIPE,
                                 env=_env(built, state_dir, FAKE_CUDA_HANG_FROM="3"), text=True)
            procs.append(p)
            assert p.stdout.readline().strip() == "READY"
        time.sleep(0.3)
        states, _ = read_recorder_dir(state_dir)
        world = [s for s in states if s.comm_index == 0]
        assert len(world) == 4 and len({s.comm_id for s in world}) == 1  # same commId on every rank
        (stall,) = analyse(world)
        assert stall.op == "AllReduce seq 3"
        top = stalled_ranks(world)[0]
        assert (top.rank, top.pid, top.reason_class) == (2, procs[2].pid, "outside-collective")
    finally:
        for p in procs:
            p.kill()
            p.wait(timeout=10)


def test_nccl_loaded_rtld_local_like_torch(built, state_dir):
    """Seen on the device with real NCCL 2.28.9: PyTorch keeps libnccl out of the global scope,
    so dlsym(RTLD_NEXT) found no pnccl* and every rank crashed. The shim must find it anyway."""
    env = _env(built, state_dir, FORENSICS_RECORDER_KEEP="1")
    done = subprocess.run([str(built["loader"]), str(built["applib"]), "1", "4", "3", "exit"], env=env,
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 0 and "DONE" in done.stdout, (done.returncode, done.stderr)
    states, problems = read_recorder_dir(state_dir)
    assert problems == [] and states and states[0].writer == "preload-shim"
    assert [c.label for c in states[0].colls[:3]] == [f"AllReduce seq {i}" for i in range(3)]
