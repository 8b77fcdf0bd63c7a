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
import threading
from bisect import bisect_right
from dataclasses import dataclass
from typing import Any
from parsers.input.errors import ToolError

MAX_THREADS = 4096
MAX_FRAMES = 256
MAX_MODULES = 8192
MAX_WORKERS = 8
MAX_REQUEST = 256  # bytes of one request line
_CB_OK, _CB_ABORT = 0, 1

_THREAD_CB = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_void_p, ctypes.c_void_p)
_FRAME_CB = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_void_p, ctypes.c_void_p)
_MODULE_CB = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_char_p, ctypes.c_uint64,
                              ctypes.c_void_p)


class _Callbacks(ctypes.Structure):
    _fields_ = [("find_elf", ctypes.c_void_p), ("find_debuginfo", ctypes.c_void_p),
                ("section_address", ctypes.c_void_p), ("debuginfo_path", ctypes.c_void_p)]


class LibdwError(ToolError):
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
        "dwfl_addrmodule": (vp, [vp, ctypes.c_uint64]),
        "dwfl_module_addrname": (ctypes.c_char_p, [vp, ctypes.c_uint64]),
        "dwfl_module_info": (ctypes.c_char_p, [vp, vp, ctypes.POINTER(ctypes.c_uint64), ctypes.POINTER(ctypes.c_uint64),
                                               vp, vp, vp, vp]),
        "dwfl_getmodules": (ctypes.c_ssize_t, [vp, _MODULE_CB, vp, ctypes.c_ssize_t]),
        "dwfl_module_eh_cfi": (vp, [vp, ctypes.POINTER(ctypes.c_uint64)]),
        "dwarf_cfi_addrframe": (i, [vp, ctypes.c_uint64, ctypes.POINTER(ctypes.c_void_p)]),
        "dwfl_errno": (i, []), "dwfl_errmsg": (ctypes.c_char_p, [i]),
        "dwfl_module_getelf": (vp, [vp, ctypes.POINTER(ctypes.c_uint64)]),
        "dwfl_module_build_id": (i, [vp, ctypes.POINTER(ctypes.c_void_p), ctypes.POINTER(ctypes.c_uint64)]),
        "dwfl_report_elf": (vp, [vp, ctypes.c_char_p, ctypes.c_char_p, i, ctypes.c_uint64, ctypes.c_bool]),
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


@dataclass(frozen=True)
class Module:
    """One mapped ELF of the target: where it lies, its load bias, and what file it is.

    `key` names the file's content (build-id, device, inode, size, mtime): the same key
    in two targets means the same symbols at the same file-relative addresses, which is
    what lets one SymbolCache serve every rank of a host. None: not cacheable (no file
    on disk, such as the vDSO, or it could not be stat'ed)."""

    start: int
    end: int
    bias: int
    name: str
    mainfile: str | None
    build_id: str | None
    key: tuple | None


def _prewarm(lib: ctypes.CDLL, dwfl: ctypes.c_void_p) -> list[Module]:
    """Open every module's ELF and CFI, and look up CFI at its start, middle and end, now;
    returns the module table (sorted by start) that names frames after the target runs.

    Why the lookups: libdw parses CFI lazily, and the first unwind through libtorch paid
    about 67 ms of CPU for it (measured here) while the target was stopped; after three
    lookups spread over each module the whole walk of a rank took under 1 ms of CPU.
    """
    libc = ctypes.CDLL(None)
    libc.free.argtypes = [ctypes.c_void_p]
    modules: list[Module] = []

    def each(module, _userdata, _name, _start, _arg):
        bias = ctypes.c_uint64()
        cfi = lib.dwfl_module_eh_cfi(module, ctypes.byref(bias))
        lo, hi = ctypes.c_uint64(), ctypes.c_uint64()
        if cfi:
            lib.dwfl_module_info(module, None, ctypes.byref(lo), ctypes.byref(hi), None, None, None, None)
            for addr in (lo.value, (lo.value + hi.value) // 2, hi.value - 1):
                frame = ctypes.c_void_p()
                if lib.dwarf_cfi_addrframe(cfi, addr - bias.value, ctypes.byref(frame)) == 0 and frame.value:
                    libc.free(frame)
        if len(modules) < MAX_MODULES:
            modules.append(_describe(lib, module))
        return _CB_OK

    lib.dwfl_getmodules(dwfl, _MODULE_CB(each), None, 0)
    modules.sort(key=lambda m: m.start)
    return modules


def _describe(lib: ctypes.CDLL, module: ctypes.c_void_p) -> Module:
    """The Module entry of one libdw module (its ELF is already open: nothing read from the target)."""
    bias = ctypes.c_uint64()
    lib.dwfl_module_getelf(module, ctypes.byref(bias))
    lo, hi, mainfile = ctypes.c_uint64(), ctypes.c_uint64(), ctypes.c_char_p()
    name = lib.dwfl_module_info(module, None, ctypes.byref(lo), ctypes.byref(hi), None, None,
                                ctypes.byref(mainfile), None)
    bits, vaddr = ctypes.c_void_p(), ctypes.c_uint64()
    size = lib.dwfl_module_build_id(module, ctypes.byref(bits), ctypes.byref(vaddr))
    build_id = ctypes.string_at(bits.value, size).hex() if size > 0 and bits.value and size <= 64 else None
    path = mainfile.value.decode(errors="surrogateescape") if mainfile.value else None
    key = None
    if path and path.startswith("/"):
        try:
            st = os.stat(path)
            key = (build_id, st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns)
        except OSError:
            key = None
    return Module(lo.value, hi.value, bias.value, name.decode(errors="replace") if name else "", path, build_id, key)


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
    """Step 3 without a cache, after detach: a fresh Dwfl over the process's maps names every frame.
    Kept as the reference the cache is tested against, and for a one-off helper run."""
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


class SymbolCache:
    """Function names by (file key, file-relative address), shared by every target of one collect.

    Why: all ranks of a host map the same python binary and the same libtorch; libdw's
    name lookup scans the whole symbol table (530k symbols in libtorch_cpu: 2-45 ms a
    lookup, measured here), and the ranks stand in the same frames. So each file is
    opened once (an offline Dwfl of that one ELF) and each address is named once. A
    lock per file serialises libdw calls on its Dwfl (libdw handles are not thread-safe)
    and makes a second thread wanting the same address wait for the first's answer.
    """

    def __init__(self, lib: ctypes.CDLL) -> None:
        self.lib = lib
        self.demangle = _demangler()
        self._files: dict[tuple, tuple[threading.Lock, Any]] = {}
        self._names: dict[tuple, str | None] = {}
        self._guard = threading.Lock()
        self.lookups = 0

    def function(self, module: Module, addr: int) -> str | None | bool:
        """Name of the function at target address `addr` in `module`; False when this
        module cannot be served from the cache (the caller names it the uncached way)."""
        if module.key is None:
            return False
        with self._guard:
            if module.key not in self._files:
                if len(self._files) >= MAX_MODULES:
                    return False
                self._files[module.key] = (threading.Lock(), None)
            lock, _ = self._files[module.key]
        rel = addr - module.bias
        with lock:
            if (module.key, rel) in self._names:
                return self._names[(module.key, rel)]
            handle = self._open(module)
            if handle is None:
                return False
            sym = self.lib.dwfl_module_addrname(handle[1], rel)
            self.lookups += 1
            name = self.demangle(sym.decode(errors="replace")) if sym else None
            self._names[(module.key, rel)] = name
            return name

    def _open(self, module: Module):
        """(dwfl, module) of the file alone at its link-time addresses, opened once; None if it cannot be
        opened or is not the file the target mapped (its build-id differs). Called under the file's lock."""
        lock, handle = self._files[module.key]
        if handle is not None:
            return handle or None
        lib = self.lib
        cbs = _Callbacks(ctypes.cast(lib.dwfl_build_id_find_elf, ctypes.c_void_p).value,
                         ctypes.cast(lib.dwfl_standard_find_debuginfo, ctypes.c_void_p).value,
                         ctypes.cast(lib.dwfl_offline_section_address, ctypes.c_void_p).value, None)
        dwfl = lib.dwfl_begin(ctypes.byref(cbs))
        found: tuple = ()
        if dwfl:
            mod = lib.dwfl_report_elf(dwfl, module.name.encode(errors="surrogateescape") or b"?",
                                      module.mainfile.encode(errors="surrogateescape"), -1, 0, False)
            lib.dwfl_report_end(dwfl, None, None)
            if mod and _describe(lib, mod).build_id == module.build_id:
                found = (dwfl, mod, cbs)
            else:
                lib.dwfl_end(dwfl)
        self._files[module.key] = (lock, found)
        return found or None

    def close(self) -> None:
        with self._guard:
            for _, handle in self._files.values():
                if handle:
                    self.lib.dwfl_end(handle[0])
            self._files.clear()


def symbolise_cached(lib: ctypes.CDLL, pid: int, threads: list[dict], modules: list[Module],
                     cache: SymbolCache) -> dict:
    """Step 3 with the shared cache: frames named from `modules` (read before the stop) and the
    cache; frames of modules the cache cannot serve fall back to `symbolise`'s way. Returns counts."""
    starts = [m.start for m in modules]
    missed: list[tuple[dict, int]] = []
    served = 0
    for th in threads:
        frames = []
        for pc, activation in th.pop("pcs"):
            addr = pc if activation else pc - 1
            i = bisect_right(starts, addr) - 1
            module = modules[i] if i >= 0 and modules[i].start <= addr < modules[i].end else None
            frame: dict = {"function": None, "library": None, "pc": f"0x{pc:x}"}
            if module is not None:
                name = cache.function(module, addr)
                if name is False:
                    missed.append((frame, (pc, activation)))
                else:
                    frame.update(function=name, library=module.name)
                    served += 1
            frames.append(frame)
        th["frames"] = frames
    if missed:  # the vDSO and the like: one Dwfl over this target's maps
        rest = [{"pcs": [pair for _, pair in missed]}]
        symbolise(lib, pid, rest)
        for (frame, _), named in zip(missed, rest[0]["frames"]):
            frame.update(function=named["function"], library=named["library"])
    return {"from_cache": served, "uncached": len(missed)}


def thread_names(pid: int, threads: list[dict]) -> None:
    for th in threads:
        try:
            with open(f"/proc/{pid}/task/{int(th['tid'])}/comm", "rb") as fh:
                th["name"] = fh.read(64).decode(errors="replace").strip()
        except OSError:
            th["name"] = None


def collect(pid: int, lock: str | None = None, cache: SymbolCache | None = None,
            lib: ctypes.CDLL | None = None) -> dict:
    """Everything for one pid, as the collector stores it (native.json).

    `lock`: a file whose exclusive flock is held only around the stop phase, so helpers
    (and the threads of one serving helper) stop their targets one at a time (see
    native_stack.py). `cache`: the SymbolCache shared by the targets of one collect;
    without it every frame is named through a Dwfl of this target alone."""
    lib = lib or _load()
    dwfl, keep = _new_dwfl(lib, pid)
    modules = _prewarm(lib, dwfl)
    fd = None
    try:
        fd = os.open(lock, os.O_RDWR | os.O_NOFOLLOW | os.O_CLOEXEC) if lock else None
        if fd is not None:
            fcntl.flock(fd, fcntl.LOCK_EX)
        threads, pause, error = walk(lib, pid, dwfl)  # ends dwfl: the target runs again
        dwfl = None
    finally:
        if dwfl is not None:  # never attached (the lock failed): nothing of the target is held
            lib.dwfl_end(dwfl)
        if fd is not None:
            os.close(fd)  # releases the lock
        del keep
    counts = None
    if cache is None:
        symbolise(lib, pid, threads)
    else:
        counts = symbolise_cached(lib, pid, threads, modules, cache)
    thread_names(pid, threads)
    data = {"tool": "libdw", "pid": pid, "pause_ms": round(pause * 1e3, 2), "error": error, "threads": threads}
    if counts is not None:
        data["symbols"] = counts
    return data


def serve(lock: str | None, workers: int, stdin=None, stdout=None) -> int:
    """Answer one JSON line per request line {"id": N, "pid": P} until stdin closes.

    Why one process for every target of a collect: the targets share their files, so
    the SymbolCache names each address once, and the interpreter and libdw load once.
    Requests run in `workers` threads (the core count): prewarm and naming run in
    parallel, the stop phase one target at a time (the lock). A short GIL switch
    interval keeps a walk's frame callbacks from waiting behind other threads' Python.
    """
    from concurrent.futures import ThreadPoolExecutor

    stdin, stdout = stdin or sys.stdin, stdout or sys.stdout
    sys.setswitchinterval(0.0005)
    lib = _load()
    cache = SymbolCache(lib)
    out_lock = threading.Lock()

    def answer(req_id: int, pid: int) -> None:
        try:
            reply = collect(pid, lock, cache, lib)
        except LibdwError as err:
            reply = {"tool": "libdw", "pid": pid, "error": f"libdw: {err}", "threads": [], "unavailable": True}
        except Exception as err:  # one target's failure must not end the others' answers
            reply = {"tool": "libdw", "pid": pid, "error": f"{type(err).__name__}: {err}", "threads": []}
        reply["id"] = req_id
        line = json.dumps(reply) + "\n"
        with out_lock:
            stdout.write(line)
            stdout.flush()

    with ThreadPoolExecutor(max_workers=max(1, workers)) as pool:
        for raw in iter(lambda: stdin.readline(MAX_REQUEST), ""):
            try:
                req = json.loads(raw)
                req_id, pid = int(req["id"]), int(req["pid"])
            except (ValueError, KeyError, TypeError):
                continue
            if pid > 0:
                pool.submit(answer, req_id, pid)
    cache.close()
    return 0


def main(argv: list[str]) -> int:
    lock, use_cache = None, True
    if len(argv) >= 3 and argv[0] == "--lock":
        lock, argv = argv[1], argv[2:]
    if argv == ["--serve"]:
        return serve(lock, min(os.cpu_count() or 1, MAX_WORKERS))
    if argv and argv[0] == "--no-cache":
        use_cache, argv = False, argv[1:]
    if len(argv) != 1 or not argv[0].isdigit():
        print("usage: libdw_stacks.py [--lock FILE] (--serve | [--no-cache] PID)", file=sys.stderr)
        return 64
    pid = int(argv[0])
    try:
        lib = _load()
        data = collect(pid, lock, SymbolCache(lib) if use_cache else None, lib)
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
