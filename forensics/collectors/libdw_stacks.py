"""Native stacks of every thread of one process through elfutils' libdw, with a short pause.

Run as `python -m forensics.collectors.libdw_stacks PID`: prints one JSON object.

Why this and not gdb, pystack or eu-stack: all of those keep the target stopped while
they look up symbols in libtorch (hundreds of thousands of them), which is most of
their time: measured here 0.2-0.8 s per target alone and seconds when eight run at
once. Unwinding itself needs only the registers, the stack memory and the CFI tables
(.eh_frame_hdr is a sorted table: binary search). So this tool works in three steps:

1. before any ptrace: read /proc/PID/maps and open every module's ELF and CFI;
2. attach, walk every thread's frames keeping raw program counters only, detach
   (dwfl_end), which is the only time the target is stopped;
3. after the target runs again: names (symbol tables, C++ demangling) from the ELF files
   on disk, which need nothing from the process.

The pause is timed here (step 2) and reported; the benchmark also measures it from
outside. libdw comes with elfutils (the `libdw1` package); no compiler is needed.
Python frames come from py-spy (its own collector), which reads them without a pause.
SIGKILL of this process mid-walk detaches the target (the kernel's ptrace rule).
"""

from __future__ import annotations

import ctypes
import ctypes.util
import fcntl
import json
import os
import sys
import time
from typing import Any

MAX_THREADS = 4096
MAX_FRAMES = 256
_CB_OK, _CB_ABORT = 0, 1

_THREAD_CB = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_void_p, ctypes.c_void_p)
_FRAME_CB = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_void_p, ctypes.c_void_p)
_MODULE_CB = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_char_p, ctypes.c_uint64,
                              ctypes.c_void_p)


class _Callbacks(ctypes.Structure):
    _fields_ = [("find_elf", ctypes.c_void_p), ("find_debuginfo", ctypes.c_void_p),
                ("section_address", ctypes.c_void_p), ("debuginfo_path", ctypes.c_void_p)]


class LibdwError(Exception):
    """libdw is missing or refused (ptrace not permitted, process gone)."""


def _load() -> ctypes.CDLL:
    name = ctypes.util.find_library("dw") or "libdw.so.1"
    try:
        lib = ctypes.CDLL(name)
    except OSError as err:
        raise LibdwError(f"libdw not found ({err}); install elfutils / libdw1") from err
    vp, i = ctypes.c_void_p, ctypes.c_int
    sig = {
        "dwfl_begin": (vp, [vp]), "dwfl_end": (None, [vp]), "dwfl_linux_proc_report": (i, [vp, i]),
        "dwfl_report_end": (i, [vp, vp, vp]), "dwfl_linux_proc_attach": (i, [vp, i, ctypes.c_bool]),
        "dwfl_getthreads": (i, [vp, _THREAD_CB, vp]), "dwfl_thread_getframes": (i, [vp, _FRAME_CB, vp]),
        "dwfl_thread_tid": (i, [vp]),
        "dwfl_frame_pc": (ctypes.c_bool, [vp, ctypes.POINTER(ctypes.c_uint64), ctypes.POINTER(ctypes.c_bool)]),
        "dwfl_addrmodule": (vp, [vp, ctypes.c_uint64]), "dwfl_module_addrname": (ctypes.c_char_p, [vp, ctypes.c_uint64]),
        "dwfl_module_info": (ctypes.c_char_p, [vp, vp, ctypes.POINTER(ctypes.c_uint64), ctypes.POINTER(ctypes.c_uint64),
                                               vp, vp, vp, vp]),
        "dwfl_getmodules": (ctypes.c_ssize_t, [vp, _MODULE_CB, vp, ctypes.c_ssize_t]),
        "dwfl_module_eh_cfi": (vp, [vp, ctypes.POINTER(ctypes.c_uint64)]),
        "dwarf_cfi_addrframe": (i, [vp, ctypes.c_uint64, ctypes.POINTER(ctypes.c_void_p)]),
        "dwfl_errno": (i, []), "dwfl_errmsg": (ctypes.c_char_p, [i]),
    }
    for fn, (res, args) in sig.items():
        f = getattr(lib, fn)
        f.restype, f.argtypes = res, args
    return lib


def _new_dwfl(lib: ctypes.CDLL, pid: int) -> tuple[ctypes.c_void_p, Any]:
    """A Dwfl over the process's maps (no ptrace yet)."""
    cbs = _Callbacks(ctypes.cast(lib.dwfl_linux_proc_find_elf, ctypes.c_void_p).value,
                     ctypes.cast(lib.dwfl_standard_find_debuginfo, ctypes.c_void_p).value, None, None)
    dwfl = lib.dwfl_begin(ctypes.byref(cbs))
    if not dwfl:
        raise LibdwError(_err(lib))
    if lib.dwfl_linux_proc_report(dwfl, pid) != 0:
        lib.dwfl_end(dwfl)
        raise LibdwError(f"cannot read /proc/{pid}/maps")
    lib.dwfl_report_end(dwfl, None, None)
    return dwfl, cbs  # cbs must outlive dwfl


def _err(lib: ctypes.CDLL) -> str:
    msg = lib.dwfl_errmsg(-1)
    return msg.decode(errors="replace") if msg else "libdw error"


def _prewarm(lib: ctypes.CDLL, dwfl: ctypes.c_void_p) -> int:
    """Open every module's ELF and CFI, and look up CFI at its start, middle and end, now.

    Why the lookups: libdw parses CFI lazily, and the first unwind through libtorch paid
    about 67 ms of CPU for it (measured here) while the target was stopped; after three
    lookups spread over each module the whole walk of a rank took under 1 ms of CPU.
    """
    libc = ctypes.CDLL(None)
    libc.free.argtypes = [ctypes.c_void_p]
    count = [0]

    def each(module, _userdata, _name, _start, _arg):
        bias = ctypes.c_uint64()
        cfi = lib.dwfl_module_eh_cfi(module, ctypes.byref(bias))
        if cfi:
            lo, hi = ctypes.c_uint64(), ctypes.c_uint64()
            lib.dwfl_module_info(module, None, ctypes.byref(lo), ctypes.byref(hi), None, None, None, None)
            for addr in (lo.value, (lo.value + hi.value) // 2, hi.value - 1):
                frame = ctypes.c_void_p()
                if lib.dwarf_cfi_addrframe(cfi, addr - bias.value, ctypes.byref(frame)) == 0 and frame.value:
                    libc.free(frame)
        count[0] += 1
        return _CB_OK

    lib.dwfl_getmodules(dwfl, _MODULE_CB(each), None, 0)
    return count[0]


def walk(lib: ctypes.CDLL, pid: int, dwfl: ctypes.c_void_p) -> tuple[list[dict], float, str | None]:
    """Step 2: the only part with the target stopped. Returns threads with raw pcs, pause seconds, error.
    Ends `dwfl` (dwfl_end detaches); the pause measured here includes dwfl_end's cleanup, an upper bound."""
    threads: list[dict] = []

    def on_frame(frame, arg):
        pc, act = ctypes.c_uint64(), ctypes.c_bool()
        if not lib.dwfl_frame_pc(frame, ctypes.byref(pc), ctypes.byref(act)):
            return _CB_ABORT
        cur = threads[-1]["pcs"]
        cur.append((pc.value, bool(act.value)))
        return _CB_OK if len(cur) < MAX_FRAMES else _CB_ABORT

    frame_cb = _FRAME_CB(on_frame)

    def on_thread(thread, arg):
        threads.append({"tid": lib.dwfl_thread_tid(thread), "pcs": []})
        if lib.dwfl_thread_getframes(thread, frame_cb, None) != 0 and not threads[-1]["pcs"]:
            threads[-1]["error"] = _err(lib)
        return _CB_OK if len(threads) < MAX_THREADS else _CB_ABORT

    start = time.monotonic()
    error = None
    try:
        if lib.dwfl_linux_proc_attach(dwfl, pid, False) != 0:
            error = f"attach failed: {_err(lib)}"
        else:
            lib.dwfl_getthreads(dwfl, _THREAD_CB(on_thread), None)
    finally:
        lib.dwfl_end(dwfl)  # detaches every thread
        pause = time.monotonic() - start
    return threads, pause, error


def _demangler():
    try:
        cxx = ctypes.CDLL(ctypes.util.find_library("stdc++") or "libstdc++.so.6")
        libc = ctypes.CDLL(None)
    except OSError:
        return lambda s: s
    fn = cxx.__cxa_demangle
    fn.restype, fn.argtypes = ctypes.c_void_p, [ctypes.c_char_p, ctypes.c_void_p, ctypes.c_void_p,
                                                ctypes.POINTER(ctypes.c_int)]
    libc.free.argtypes = [ctypes.c_void_p]

    def demangle(name: str) -> str:
        if not name.startswith("_Z"):
            return name
        status = ctypes.c_int()
        out = fn(name.encode(), None, None, ctypes.byref(status))
        if not out or status.value != 0:
            return name
        text = ctypes.string_at(out).decode(errors="replace")
        libc.free(out)
        return text

    return demangle


def symbolise(lib: ctypes.CDLL, pid: int, threads: list[dict]) -> None:
    """Step 3, after detach: function and module names from the ELF files on disk."""
    dwfl, keep = _new_dwfl(lib, pid)
    demangle = _demangler()
    cache: dict[int, dict] = {}
    try:
        for th in threads:
            frames = []
            for pc, activation in th.pop("pcs"):
                if pc not in cache:
                    cache[pc] = _name(lib, dwfl, pc if activation else pc - 1, demangle)
                frames.append(dict(cache[pc], pc=f"0x{pc:x}"))
            th["frames"] = frames
    finally:
        lib.dwfl_end(dwfl)
        del keep


def _name(lib: ctypes.CDLL, dwfl: ctypes.c_void_p, pc: int, demangle) -> dict:
    module = lib.dwfl_addrmodule(dwfl, pc)
    if not module:
        return {"function": None, "library": None}
    start = ctypes.c_uint64()
    path = lib.dwfl_module_info(module, None, ctypes.byref(start), None, None, None, None, None)
    sym = lib.dwfl_module_addrname(module, pc)
    return {"function": demangle(sym.decode(errors="replace")) if sym else None,
            "library": path.decode(errors="replace") if path else None}


def thread_names(pid: int, threads: list[dict]) -> None:
    for th in threads:
        try:
            with open(f"/proc/{pid}/task/{int(th['tid'])}/comm", "rb") as fh:
                th["name"] = fh.read(64).decode(errors="replace").strip()
        except OSError:
            th["name"] = None


def collect(pid: int, lock: str | None = None) -> dict:
    """Everything for one pid, as the collector stores it (native.json).

    `lock`: a file whose exclusive flock is held only around the stop phase, so helpers
    started together stop their targets one at a time (see native_stack.py)."""
    lib = _load()
    dwfl, keep = _new_dwfl(lib, pid)
    _prewarm(lib, dwfl)
    fd = os.open(lock, os.O_RDWR | os.O_NOFOLLOW | os.O_CLOEXEC) if lock else None
    try:
        if fd is not None:
            fcntl.flock(fd, fcntl.LOCK_EX)
        threads, pause, error = walk(lib, pid, dwfl)
    finally:
        if fd is not None:
            os.close(fd)  # releases the lock
        del keep
    symbolise(lib, pid, threads)
    thread_names(pid, threads)
    return {"tool": "libdw", "pid": pid, "pause_ms": round(pause * 1e3, 2), "error": error, "threads": threads}


def main(argv: list[str]) -> int:
    lock = None
    if len(argv) == 3 and argv[0] == "--lock":
        lock, argv = argv[1], argv[2:]
    if len(argv) != 1 or not argv[0].isdigit():
        print("usage: libdw_stacks.py [--lock FILE] PID", file=sys.stderr)
        return 64
    pid = int(argv[0])
    try:
        data = collect(pid, lock)
    except LibdwError as err:
        print(f"libdw: {err}", file=sys.stderr)
        return 3
    json.dump(data, sys.stdout)
    sys.stdout.write("\n")
    if data["error"]:
        print(f"libdw: {data['error']}", file=sys.stderr)
        return 2 if not data["threads"] else 1
    return 0


if __name__ == "__main__":
    os.environ.setdefault("LC_ALL", "C")
    sys.exit(main(sys.argv[1:]))
