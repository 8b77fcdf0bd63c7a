"""Build and locate the recorder's libraries from the C sources in nccl_patches/.

The recorder (one name for it everywhere: `forensics recorder`, the `recorder` collector, the
`recorder-state` kind) is an NCCL profiler plugin, plus an LD_PRELOAD shim for NCCL < 2.23.

The plugin needs only a C compiler (no CUDA, no NCCL headers), so we build it where
it runs: next to the sources when that folder is writable, else in the user's cache
(`$XDG_CACHE_HOME/hang-forensics`). Builds are keyed by a hash of the sources, so an
edited source never reuses a stale library.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
from pathlib import Path

from forensics import safefs
from forensics.errors import ForensicsError

SOURCES = Path(__file__).resolve().parent.parent / "nccl_patches"
#: the recorder as a profiler plugin. The file keeps NCCL's naming, libnccl-profiler-<name>.so: NCCL finds
#: it by that pattern when NCCL_PROFILER_PLUGIN holds a bare name ('forensics') rather than a path, and
#: deployments, the Makefile and the device scripts name this file
PLUGIN_NAME = "libnccl-profiler-forensics.so"
PRELOAD_NAME = "libnccl-recorder-preload.so"  #: the recorder as an LD_PRELOAD shim (NCCL < 2.23)
OVERRIDE_ENV = "FORENSICS_NCCL_PLUGIN"  #: an explicit, already built recorder plugin (a published variable: kept)
DIR_ENV = "FORENSICS_RECORDER_DIR"
#: a second profiler plugin the recorder forwards every call to (NCCL loads only one): nccl_patches/src/chain.c
CHAIN_ENV = "FORENSICS_RECORDER_CHAIN"

#: What each library is made of (relative to SOURCES), and its link flags.
TARGETS: dict[str, tuple[list[str], list[str]]] = {
    PLUGIN_NAME: (["src/recorder_core.c", "src/profiler_plugin.c", "src/chain.c"], ["-ldl"]),
    PRELOAD_NAME: (["src/recorder_core.c", "src/preload_shim.c"], ["-ldl"]),
}
HEADERS = ["include/recorder_format.h", "include/nccl_profiler_abi.h", "src/recorder_core.h", "src/plugin_entry.h"]
CFLAGS = ["-O2", "-g", "-Wall", "-fPIC", "-pthread", "-fvisibility=hidden", "-shared", "-Wl,-z,nodelete"]


def source_hash(name: str = PLUGIN_NAME) -> str:
    """Hash of every file the library is built from: the build folder's name."""
    digest = hashlib.sha256()
    for rel in TARGETS[name][0] + HEADERS:
        digest.update(rel.encode())
        digest.update((SOURCES / rel).read_bytes())
    return digest.hexdigest()[:16]


def _build_roots() -> list[Path]:
    cache = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "hang-forensics" / "nccl-recorder"
    return [SOURCES / "build", cache]


def _writable(folder: Path) -> bool:
    probe = folder
    while not probe.exists():
        probe = probe.parent
    return os.access(probe, os.W_OK)


def built_path(name: str = PLUGIN_NAME) -> Path | None:
    """The library already built from the current sources, if any."""
    key = source_hash(name)
    for root in _build_roots():
        candidate = root / key / name
        if candidate.is_file():
            return candidate
    return None


def build(name: str = PLUGIN_NAME, cc: str | None = None, force: bool = False) -> Path:
    """Compile the library (if needed) and return its absolute path."""
    if not force and (existing := built_path(name)):
        return existing
    compiler = cc or os.environ.get("CC") or "gcc"
    if shutil.which(compiler) is None:
        raise ForensicsError(f"no C compiler {compiler!r} found: install gcc, or set CC")
    root = next((r for r in _build_roots() if _writable(r)), None)
    if root is None:
        raise ForensicsError(f"nowhere to build: neither of {[str(r) for r in _build_roots()]} is writable")
    out_dir = root / source_hash(name)
    safefs.ensure_folder(out_dir)
    out = out_dir / name
    tmp = out_dir / f".{name}.{os.getpid()}.tmp"
    sources, libs = TARGETS[name]
    cmd = [compiler, *CFLAGS, f"-I{SOURCES / 'include'}", *[str(SOURCES / s) for s in sources], "-o", str(tmp), *libs]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
    if proc.returncode != 0:
        tmp.unlink(missing_ok=True)
        raise ForensicsError(f"building {name} failed:\n{' '.join(cmd)}\n{proc.stderr.strip()}")
    os.replace(tmp, out)  # atomic: a concurrent build never exposes half a library
    return out


def plugin_path(build_if_missing: bool = True) -> Path:
    """The recorder plugin to hand NCCL: $FORENSICS_NCCL_PLUGIN, else a build of ours."""
    override = os.environ.get(OVERRIDE_ENV)
    if override:
        path = Path(override)
        if not path.is_file():
            raise ForensicsError(f"{OVERRIDE_ENV}={override} does not exist")
        return path.resolve()
    found = built_path(PLUGIN_NAME)
    if found:
        return found
    if not build_if_missing:
        raise ForensicsError("the recorder plugin is not built yet: run `forensics recorder build`")
    return build(PLUGIN_NAME)


def plugin_env(state_dir: str | None = None, build_if_missing: bool = True, chain: str | None = None) -> dict[str, str]:
    """Environment a rank needs so NCCL loads the recorder and writes state where we collect it.

    chain: a second profiler plugin (NCCL's Inspector, say) that had NCCL_PROFILER_PLUGIN before: the
    recorder takes that seat and forwards every call to it, so both run."""
    env = {"NCCL_PROFILER_PLUGIN": str(plugin_path(build_if_missing))}
    env[DIR_ENV] = state_dir or os.environ.get(DIR_ENV) or "/dev/shm"
    if chain:
        target = Path(chain).expanduser()
        if not target.is_file():
            raise ForensicsError(f"--chain {chain}: no such file (name the second plugin's .so by its path)")
        env[CHAIN_ENV] = str(target.resolve())
    return env
