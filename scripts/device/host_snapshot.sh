#!/usr/bin/env bash
# Record the real host outputs the host collectors and readers are built for, on a GPU machine.
#
#   usage: scripts/device/host_snapshot.sh OUTDIR        (run from the repository root)
#   env:   PYTHON=python3        interpreter for the optional Python part (needs nothing installed)
#          HF_PROVOKE=1          also provoke, in a child process, a real CUDA OOM and a real illegal
#                                memory access (expected to log Xid 31/13/43 in the kernel log);
#                                no GPU setting is changed and no reset is done.
#
# Writes OUTDIR/<name> plus <name>.rc and <name>.stderr for each command, meta.txt, and when the
# repository imports, OUTDIR/bundle (the real host collectors) and OUTDIR/hosts.json
# ('forensics hosts' on it). No installs, every command under a hard timeout: about 3 s on a
# healthy host, under 30 s when nvidia-smi hangs; HF_PROVOKE=1 adds up to 45 s.
set -u
out=${1:?usage: host_snapshot.sh OUTDIR}
mkdir -p "$out"
PY=${PYTHON:-python3}
T=8

run() {  # run NAME CMD...: stdout to OUTDIR/NAME, stderr and exit status beside it
    local name=$1; shift
    timeout -k 2 "$T" "$@" >"$out/$name" 2>"$out/$name.stderr"
    echo $? >"$out/$name.rc"
}

{
    echo "date: $(date -u +%FT%TZ)"
    echo "uname: $(uname -a)"
    echo "id: $(id)"
    echo "dmesg_restrict: $(cat /proc/sys/kernel/dmesg_restrict 2>/dev/null || echo n/a)"
    echo "nvidia-smi: $(timeout 5 nvidia-smi --version 2>&1 | tr '\n' ' ')"
} >"$out/meta.txt"

run nvidia-smi-q.txt nvidia-smi -q
case "$(cat "$out/nvidia-smi-q.txt.rc")" in
    124|137) echo "nvidia-smi -q hung: -q -x and topo -m not tried (they would hang too)" >"$out/nvidia-smi-skipped.txt" ;;
    *) run nvidia-smi-q.xml nvidia-smi -q -x; run nvidia-smi-topo.txt nvidia-smi topo -m ;;
esac
run kernel-dmesg-T.log dmesg -T
run kernel-journal.log journalctl -k -b -o short-iso --no-pager -q -n 20000
run df.txt df -P -T
run df-inodes.txt df -P -T -i
run meminfo.txt cat /proc/meminfo
run pressure.txt grep -H . /proc/pressure/cpu /proc/pressure/memory /proc/pressure/io
run cpufreq.txt sh -c 'grep -H . /sys/devices/system/cpu/cpu*/cpufreq/scaling_governor /sys/devices/system/cpu/cpu*/cpufreq/scaling_cur_freq /sys/devices/system/cpu/cpu*/cpufreq/cpuinfo_max_freq 2>&1 | head -n 3000; grep -m4 "cpu MHz" /proc/cpuinfo'
if [ -d /sys/class/infiniband ]; then
    run infiniband.txt sh -c 'ls -la /sys/class/infiniband/; for p in /sys/class/infiniband/*/ports/*; do for f in state phys_state rate link_layer; do echo "$p/$f: $(cat $p/$f 2>&1)"; done; grep -H . $p/counters/* 2>/dev/null; done'
else
    echo "no /sys/class/infiniband on this host" >"$out/infiniband.txt"; echo 0 >"$out/infiniband.txt.rc"
fi

# The real host collectors and the 'forensics hosts' verdict on them, when the repository imports.
if PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}" timeout 10 "$PY" -c "import forensics.collectors.host" 2>/dev/null; then
    PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}" timeout -k 2 15 "$PY" - "$out/bundle" >"$out/collectors.txt" 2>&1 <<'PYEOF'
import sys
from pathlib import Path
from forensics.bundle.manifest import HostRecord
from forensics.bundle.writer import BundleWriter
from forensics.collectors.base import CollectOptions, HostTarget, timed
from forensics.collectors.host import host_collectors
import socket
writer = BundleWriter(Path(sys.argv[1]), command=["scripts/device/host_snapshot.sh"])
host = socket.gethostname().split(".")[0]
record = HostRecord(host=host, dir=writer.host_dir(host))
target = HostTarget(host=host, bundle_root=writer.root, rel_dir=record.dir)
for c in host_collectors():
    rec = timed(c.name, lambda c=c: c.collect(target, CollectOptions(timeout=5)))
    record.collectors.append(rec)
    print(f"{rec.name}: {rec.status} {rec.seconds}s {rec.error or ''} {rec.files}")
writer.add_host(record)
writer.save()
PYEOF
    echo $? >"$out/collectors.txt.rc"
    PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}" timeout 10 "$PY" -m forensics hosts "$out/bundle" --json --facts >"$out/hosts.json" 2>"$out/hosts.json.stderr"
    echo $? >"$out/hosts.json.rc"
else
    echo "forensics not importable from $PWD with $PY: Python part skipped" >"$out/collectors.txt"
fi

# Optional: real CUDA failure messages and the kernel lines they leave (child process only).
if [ "${HF_PROVOKE:-0}" = "1" ]; then
    # triton.jit reads its kernel's source with inspect: the kernel must live in a real .py file
    # (from stdin it fails with "@jit functions should be defined in a Python file", seen on hf-B).
    cat >"$out/provoke_kernel.py" <<'PYEOF'
import triton
import triton.language as tl


@triton.jit
def bad(ptr):
    tl.store(ptr + (1 << 40), 1.0)  # far outside any allocation: an MMU fault
PYEOF
    PYTHONPATH="$out${PYTHONPATH:+:$PYTHONPATH}" timeout -k 2 25 "$PY" - >"$out/provoke.txt" 2>&1 <<'PYEOF'
import torch
free, total = torch.cuda.mem_get_info()
try:
    torch.empty(int(total * 2), dtype=torch.uint8, device="cuda")
except torch.OutOfMemoryError as err:
    print("CUDA-OOM:", f"{type(err).__module__}.{type(err).__name__}: {err}")
try:
    from provoke_kernel import bad

    x = torch.zeros(1, device="cuda")
    bad[(1,)](x)
    torch.cuda.synchronize()
    print("ILLEGAL-ACCESS: no error raised")
except Exception as err:  # the illegal address surfaces here
    print("ILLEGAL-ACCESS:", f"{type(err).__module__}.{type(err).__name__}: {err}")
PYEOF
    echo $? >"$out/provoke.txt.rc"
    # The same fault without triton or a C compiler: hand-written PTX launched through libcuda.
    timeout -k 2 15 "$PY" - >"$out/provoke-ptx.txt" 2>&1 <<'PYEOF'
import ctypes
PTX = b"""
.version 7.0
.target sm_50
.address_size 64
.visible .entry bad(.param .u64 bad_p)
{
    .reg .b64 %rd<3>;
    .reg .b32 %r<2>;
    ld.param.u64 %rd1, [bad_p];
    add.u64 %rd2, %rd1, 1099511627776;
    mov.u32 %r1, 1;
    st.global.u32 [%rd2], %r1;
    ret;
}
"""
cu = None
def ck(rc, what):
    if rc:
        name = ctypes.c_char_p()
        cu.cuGetErrorName(rc, ctypes.byref(name))
        raise RuntimeError(f"{what}: {name.value.decode() if name.value else rc} ({rc})")
try:
    cu = ctypes.CDLL("libcuda.so.1")
    ck(cu.cuInit(0), "cuInit")
    dev = ctypes.c_int()
    ck(cu.cuDeviceGet(ctypes.byref(dev), 0), "cuDeviceGet")
    ctx = ctypes.c_void_p()
    ck(cu.cuDevicePrimaryCtxRetain(ctypes.byref(ctx), dev), "cuDevicePrimaryCtxRetain")
    ck(cu.cuCtxSetCurrent(ctx), "cuCtxSetCurrent")
    mod, fn, ptr = ctypes.c_void_p(), ctypes.c_void_p(), ctypes.c_uint64()
    ck(cu.cuModuleLoadData(ctypes.byref(mod), ctypes.c_char_p(PTX)), "cuModuleLoadData")
    ck(cu.cuModuleGetFunction(ctypes.byref(fn), mod, b"bad"), "cuModuleGetFunction")
    ck(cu.cuMemAlloc_v2(ctypes.byref(ptr), ctypes.c_size_t(4)), "cuMemAlloc")
    arg = ctypes.c_uint64(ptr.value)
    params = (ctypes.c_void_p * 1)(ctypes.cast(ctypes.byref(arg), ctypes.c_void_p))
    ck(cu.cuLaunchKernel(fn, 1, 1, 1, 1, 1, 1, 0, None, params, None), "cuLaunchKernel")
    ck(cu.cuCtxSynchronize(), "cuCtxSynchronize")
    print("ILLEGAL-ACCESS-PTX: no error raised")
except Exception as err:
    print("ILLEGAL-ACCESS-PTX:", f"{type(err).__name__}: {err}")
PYEOF
    echo $? >"$out/provoke-ptx.txt.rc"
    sleep 1
    run kernel-dmesg-T-after.log dmesg -T
fi
ls -la "$out" >"$out/ls.txt"
