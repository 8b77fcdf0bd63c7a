#!/usr/bin/env bash
# Runs on the GPU machine (device tool), from the repository root: the whole NCCL scenario
# matrix in one go, leaving one archive in $OUT.
#   part A: recorder SIGSTOP scenario (8 ranks as 8 hosts) + the five NCCL hang scenarios,
#           each collected live with 'forensics collect' (recorder loaded in every rank)
#   part B: recorder overhead benchmark + real host outputs
#   part S: the five scenarios only; part X (2 GPUs): p2p and mixed layouts, sleep/sigstop/kill
# Carried: .whl (py-spy, pygdbmi, loguru, networkx, ClusterShell for Python 3.12).
set -u
part=${1:-A}
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 PYTHONUNBUFFERED=1
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit 2
export PYTHONPATH=/tmp/site:$PWD PATH=/tmp/site/bin:$PATH
W=/tmp/hf-$part; rm -rf "$W"; mkdir -p "$W"
{
  date -u; nvidia-smi -L; python3 -c 'import torch; print(torch.__version__, torch.cuda.nccl.version())'
  for t in gcc gdb py-spy ncclras; do printf '%s: %s\n' "$t" "$(command -v $t)"; done
} >"$W/info.txt" 2>&1
SO=$(python3 -m forensics nccl-plugin path 2>>"$W/info.txt")
[ -f "$SO" ] || SO=$PWD/nccl_patches/libnccl-profiler-forensics.so
echo "plugin: $SO" >>"$W/info.txt"
cat "$W/info.txt"
if [ "$part" = H ]; then  # host outputs again, with the provoked CUDA faults (Xid lines)
  HF_PROVOKE=1 timeout -k 5 120 bash scripts/device/host_snapshot.sh "$W/host" >"$W/host_snapshot.log" 2>&1
  echo "host snapshot rc=$?"; cat "$W/host/provoke.txt" "$W/host/provoke-ptx.txt" 2>/dev/null | tail -n 8
  diff "$W/host/kernel-dmesg-T.log" "$W/host/kernel-dmesg-T-after.log" | tail -n 8
elif [ "$part" = P ]; then  # the LD_PRELOAD shim (meant for NCCL < 2.23) on the real NCCL, no profiler plugin
  SHIM=$(python3 -m forensics nccl-plugin path --preload 2>/dev/null || echo "$PWD/nccl_patches/libnccl-recorder-preload.so")
  [ -f "$SHIM" ] || SHIM=$PWD/nccl_patches/libnccl-recorder-preload.so
  echo "shim: $SHIM"
  timeout -k 5 200 python3 scripts/device/nccl_scenarios.py --out-dir "$W/preload" --total-s 180 --world 4 --scenarios sleep,sigstop \
    --extra-env LD_PRELOAD="$SHIM" --extra-env FORENSICS_RECORDER_DIR=/dev/shm/hf-preload \
    --collect-cmd "python3 -m forensics collect --pid {pids} -o {dir} --json -q --timeout 15" 2>&1 | tee "$W/preload.log" | tail -n 12
  ls -la /dev/shm/hf-preload | head
elif [ "$part" = X ]; then  # 2 GPUs: one rank per GPU (P2P/NVLink), then 2 GPUs as one host + fake hosts
  nvidia-smi topo -m >"$W/topo.txt" 2>&1
  for layout in p2p mixed; do
    world=2; [ "$layout" = mixed ] && world=4
    timeout -k 5 260 python3 scripts/device/nccl_scenarios.py --out-dir "$W/$layout" --total-s 240 --layout $layout --gpus 2 \
      --world $world --scenarios sleep,sigstop,kill \
      --extra-env NCCL_PROFILER_PLUGIN="$SO" --extra-env FORENSICS_RECORDER_DIR=/dev/shm/hf-recorder \
      --collect-cmd "python3 -m forensics collect --pid {pids} -o {dir} --json -q --timeout 15 --native" 2>&1 | tee "$W/$layout.log" | tail -n 12
  done
elif [ "$part" = S ]; then  # scenarios only (the recorder run of part A already done)
  timeout -k 5 400 python3 scripts/device/nccl_scenarios.py --out-dir "$W/nccl" --total-s 380 \
    --extra-env NCCL_PROFILER_PLUGIN="$SO" --extra-env FORENSICS_RECORDER_DIR=/dev/shm/hf-recorder \
    --collect-cmd "python3 -m forensics collect --pid {pids} -o {dir} --json -q --timeout 15 --native" 2>&1 | tee "$W/nccl_scenarios.log" | tail -n 30
elif [ "$part" = A ]; then
  timeout -k 5 150 python3 nccl_patches/device/sigstop_scenario.py --ranks 8 --victim 3 --plugin "$SO" --out "$W/recorder_sigstop8" >"$W/recorder_sigstop8.log" 2>&1
  echo "recorder sigstop: rc=$?"; tail -n 25 "$W/recorder_sigstop8.log"
  timeout -k 5 400 python3 scripts/device/nccl_scenarios.py --out-dir "$W/nccl" --total-s 380 \
    --extra-env NCCL_PROFILER_PLUGIN="$SO" --extra-env FORENSICS_RECORDER_DIR=/dev/shm/hf-recorder \
    --collect-cmd "python3 -m forensics collect --pid {pids} -o {dir} --json -q --timeout 15 --native" 2>&1 | tee "$W/nccl_scenarios.log" | tail -n 30
else
  timeout -k 5 300 python3 benchmarks/nccl_plugin_overhead.py --ranks 2 --rounds 2 --plugin "$SO" --json "$W/overhead.json" 2>&1 | tee "$W/overhead.txt" | tail -n 40
  HF_PROVOKE=1 timeout -k 5 90 bash scripts/device/host_snapshot.sh "$W/host" >"$W/host_snapshot.log" 2>&1
  echo "host snapshot rc=$?"
fi
find "$W" -name '*.log' -size +20M -exec truncate -s 20M {} \;
tar czf "$OUT/device-$part.tar.gz" -C /tmp "hf-$part"
ls -la "$OUT"
