"""Build and drive nccl_patches/tests/harness.c, the stand-in for NCCL in CPU-only tests.

The harness dlopens the real plugin and calls its entry points in NCCL's order
(see harness.c). Tests use this module to build it with gcc and to start "ranks"
that hang in a collective, always killed again by the caller.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

HERE = Path(__file__).resolve().parent


def build_harness(out_dir: Path, cc: str = "gcc") -> Path:
    """Compile the harness into out_dir; returns its path."""
    if shutil.which(cc) is None:
        raise RuntimeError(f"no C compiler {cc!r}")
    out = out_dir / "harness"
    cmd = [cc, "-O1", "-g", "-Wall", "-pthread", f"-I{HERE / 'include'}", str(HERE / "tests" / "harness.c"), "-o",
           str(out), "-ldl"]
    subprocess.run(cmd, check=True, capture_output=True, text=True, timeout=120)
    return out


def run_harness(harness: Path, plugin: Path, version: int, args: list[str], env: dict[str, str],
                timeout: float = 60) -> subprocess.CompletedProcess:
    """Run the harness to completion ('run' mode)."""
    full = {**os.environ, **env}
    return subprocess.run([str(harness), str(plugin), str(version), *args], env=full, capture_output=True,
                          text=True, timeout=timeout)


@dataclass
class HangingRank:
    """A harness process left hanging inside a collective ('hang' mode)."""

    proc: subprocess.Popen
    rank: int

    @property
    def pid(self) -> int:
        return self.proc.pid

    def stop(self) -> None:
        os.kill(self.pid, signal.SIGSTOP)

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()  # SIGKILL ends a stopped process too
        self.proc.wait(timeout=10)


def start_hanging_rank(harness: Path, plugin: Path, version: int, rank: int, nranks: int, ndone: int,
                       recv_steps: int, send_steps: int, recv_state: int, send_state: int, env: dict[str, str],
                       comm_id: int = 0xABCDEF12345678, ready_timeout: float = 20) -> HangingRank:
    """Start one rank and wait until it printed READY (it then hangs until killed)."""
    full = {**os.environ, **env, "RANK": str(rank)}
    args = [str(harness), str(plugin), str(version), "hang", str(rank), str(nranks), str(ndone), str(recv_steps),
            str(send_steps), str(recv_state), str(send_state), hex(comm_id)]
    proc = subprocess.Popen(args, env=full, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    hr = HangingRank(proc, rank)
    deadline = time.monotonic() + ready_timeout
    assert proc.stdout is not None
    line = proc.stdout.readline()
    if line.strip() != "READY" or time.monotonic() > deadline:
        hr.kill()
        raise RuntimeError(f"harness rank {rank} did not start: {line!r} {proc.stderr.read() if proc.stderr else ''}")
    return hr


def build_count_plugin(out_dir: Path, cc: str = "gcc", without_v5: bool = False) -> Path:
    """Compile tests/count_plugin.c, a second profiler plugin that counts what it receives (chaining tests).

    without_v5: leave interface v5 out, as an older plugin would (the recorder must refuse it by name)."""
    out = out_dir / ("libnccl-profiler-count-nov5.so" if without_v5 else "libnccl-profiler-count.so")
    cmd = [cc, "-O2", "-Wall", "-fPIC", "-shared", "-fvisibility=hidden", f"-I{HERE / 'include'}",
           *(["-DCOUNT_WITHOUT_V5"] if without_v5 else []),
           str(HERE / "tests" / "count_plugin.c"), "-o", str(out)]
    subprocess.run(cmd, check=True, capture_output=True, text=True, timeout=120)
    return out


def build_microbench(out_dir: Path, cc: str = "gcc") -> Path:
    """Compile tests/microbench.c, which calls plugins the way NCCL does for one collective (benchmarks and
    the count of clock reads and atomics per collective)."""
    out = out_dir / "microbench"
    cmd = [cc, "-O2", "-Wall", f"-I{HERE / 'include'}", str(HERE / "tests" / "microbench.c"), "-o", str(out), "-ldl",
           "-pthread"]
    subprocess.run(cmd, check=True, capture_output=True, text=True, timeout=120)
    return out


def build_counting_recorder(out_dir: Path, cc: str = "gcc") -> Path:
    """The recorder built with -DREC_COUNT: it counts, per thread in hf_recorder_counts, its precise clock
    reads, loads of the published tick, coarse vDSO reads and atomic read-modify-writes."""
    out = out_dir / "libnccl-profiler-forensics-count.so"
    src = HERE / "src"
    cmd = [cc, "-O2", "-Wall", "-fPIC", "-pthread", "-shared", "-fvisibility=hidden", "-DREC_COUNT",
           f"-I{HERE / 'include'}", *(str(src / n) for n in ("recorder_core.c", "profiler_plugin.c", "chain.c")),
           "-o", str(out), "-ldl"]
    subprocess.run(cmd, check=True, capture_output=True, text=True, timeout=120)
    return out
