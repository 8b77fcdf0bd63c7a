#!/usr/bin/env bash
# Runs on the GPU machine (device tool), from the repository root: the whole NCCL scenario
# matrix in one go, leaving one archive in $OUT.
#   part A: recorder SIGSTOP scenario (8 ranks as 8 hosts) + the five NCCL hang scenarios,
#           each collected live with 'forensics collect' (recorder loaded in every rank)
#   part B: recorder overhead benchmark + real host outputs
#   part S: the five scenarios only; part X (2 GPUs): p2p and mixed layouts, sleep/sigstop/kill
#   part R: issue 14 hang cases + issue 15 running stragglers (scripts/device/live_scenarios.py)
#           + issue 19 overhead on one GPU, all inside HF_R_BUDGET seconds (default 535), packed
#           by pack_out.py into $OUT/{R14,R15,R19}.tar.gz + summary.txt.
#           `run_matrix.sh R --backend gloo` is its CPU dry run (no plugin, no RAS, 4 ranks).
#   part C: issue 26 hang cases (order, lock, pipeline, deadlock, subgroup) and running stragglers
#           without the recorder (slow300norec) and 5 ms (slow5), packed into $OUT/{C26,C26run}.tar.gz.
#   part I39: issue 39's matrix (scripts/device/i39_scenarios.py): wrongpeer, wrongpeersend, sendsend, pipestall, monbarrier,
#           ordermismatch, lock, subgroup, gpusleep (recvrecv too, when HF_I39 names it); culprits, world sizes and
#           sizes from HF_I39_SEED (default 39);
#           each a live bundle + a logs folder (forensics env --recorder) + torch's fr_trace, packed as it ends
#           into $OUT/I39-<case>.tar.gz (one per case). `run_matrix.sh I39 --backend gloo` is its CPU dry run (8 ranks).
#   part E39: issue 39 item 6: what each recommended setting costs a step (benchmarks/env_cost.py, NCCL, 4 ranks
#           as 4 hosts on one GPU, configurations interleaved), $OUT/env_cost.{txt,json}; ~5-6 min.
# Carried: .whl (py-spy, pygdbmi, loguru, networkx, ClusterShell for Python 3.12).
set -u
part=${1:-A}
backend=nccl
[ "${2:-}" = --backend ] && backend=${3:-nccl}
T0=$(date +%s)
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 PYTHONUNBUFFERED=1
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit 2
export PYTHONPATH=/tmp/site:$PWD PATH=/tmp/site/bin:$PATH
W=/tmp/hf-$part; rm -rf "$W"; mkdir -p "$W"
{
  date -u; nvidia-smi -L; python3 -c 'import torch; print(torch.__version__, torch.cuda.nccl.version())'
  for t in gcc gdb py-spy ncclras; do printf '%s: %s\n' "$t" "$(command -v $t)"; done
} >"$W/info.txt" 2>&1
SO=$(python3 -m forensics recorder path 2>>"$W/info.txt")
[ -f "$SO" ] || SO=$PWD/nccl_patches/libnccl-profiler-forensics.so
echo "plugin: $SO" >>"$W/info.txt"
cat "$W/info.txt"
if [ "$part" = H ]; then  # host outputs again, with the provoked CUDA faults (Xid lines)
  HF_PROVOKE=1 timeout -k 5 120 bash scripts/device/host_snapshot.sh "$W/host" >"$W/host_snapshot.log" 2>&1
  echo "host snapshot rc=$?"; cat "$W/host/provoke.txt" "$W/host/provoke-ptx.txt" 2>/dev/null | tail -n 8
  diff "$W/host/kernel-dmesg-T.log" "$W/host/kernel-dmesg-T-after.log" | tail -n 8
elif [ "$part" = P ]; then  # the LD_PRELOAD shim (meant for NCCL < 2.23) on the real NCCL, no profiler plugin
  SHIM=$(python3 -m forensics recorder path --preload 2>/dev/null || echo "$PWD/nccl_patches/libnccl-recorder-preload.so")
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
elif [ "$part" = C ]; then  # issue 26: causes that need judges combined, then stragglers without the recorder
  BUDGET=${HF_C_BUDGET:-540}
  cap() { local c=$1 l; l=$(( T0 + BUDGET - $(date +%s) - $2 )); [ "$l" -lt "$c" ] && c=$l; echo "$c"; }
  python3 -m forensics env >"$W/forensics_env.txt" 2>&1
  if [ "$backend" = nccl ]; then common=(--backend nccl --plugin "$SO"); else common=(--backend gloo --plugin "" --world "${HF_R_WORLD:-4}"); fi
  common+=(--recorder-root /dev/shm/hf-C)
  mkdir -p "$W/C26" "$W/C26run"
  t=$(cap 400 110)
  echo "C26: ${t} s cap at +$(( $(date +%s) - T0 )) s"
  timeout -k 15 "$t" python3 scripts/device/live_scenarios.py --out-dir "$W/C26" "${common[@]}" \
    --cases "${HF_C26:-order,lock,pipeline,deadlock,subgroup}" --total-s $((t - 8)) 2>&1 | tee "$W/C26/driver.log" | grep -v '^{' | tail -n 20
  t=$(cap 120 25)
  echo "C26run: ${t} s cap at +$(( $(date +%s) - T0 )) s"
  [ "$t" -ge 40 ] && timeout -k 15 "$t" python3 scripts/device/live_scenarios.py --out-dir "$W/C26run" "${common[@]}" \
    --cases "${HF_C26RUN:-slow300norec,slow5}" --rounds 2 --total-s $((t - 8)) 2>&1 | tee "$W/C26run/driver.log" | grep -v '^{' | tail -n 20
  for f in "$W"/C26/pgids.txt "$W"/C26run/pgids.txt; do
    [ -f "$f" ] && while read -r g; do kill -CONT -- "-$g" 2>/dev/null; kill -KILL -- "-$g" 2>/dev/null; done <"$f"
  done
  rm -rf /dev/shm/hf-C
  timeout -k 5 60 python3 scripts/device/pack_out.py --out "$OUT" --head "$W/info.txt" C26="$W/C26" C26run="$W/C26run" | tail -n 80
  echo "done at +$(( $(date +%s) - T0 )) s"; ls -la "$OUT"
  exit 0
elif [ "$part" = I39 ]; then  # issue 39: p2p, barriers, aborts, locks; live and post-mortem
  BUDGET=${HF_I39_BUDGET:-545}
  python3 -m forensics env --recorder --dir '@DIR@' >"$W/forensics_env.txt" 2>&1
  if [ "$backend" = nccl ]; then common=(--backend nccl --plugin "$SO"); else common=(--backend gloo --plugin "" --world "${HF_I39_WORLD:-8}"); fi
  t=$(( T0 + BUDGET - $(date +%s) ))
  echo "I39: ${t} s cap at +$(( $(date +%s) - T0 )) s"
  timeout -k 15 "$t" python3 scripts/device/i39_scenarios.py --out-dir "$W/I39" "${common[@]}" --seed "${HF_I39_SEED:-39}" \
    --recorder-root /dev/shm/hf-I39 --cases "${HF_I39:-wrongpeer,wrongpeersend,sendsend,pipestall,monbarrier,ordermismatch,lock,subgroup,gpusleep}" \
    --total-s $((t - 12)) --pack-to "${OUT:-$W/out}" 2>&1 | tee "$W/I39.log" | grep -v '^{' | tail -n 40
  [ -f "$W/I39/pgids.txt" ] && while read -r g; do kill -CONT -- "-$g" 2>/dev/null; kill -KILL -- "-$g" 2>/dev/null; done <"$W/I39/pgids.txt"
  rm -rf /dev/shm/hf-I39
  cat "$W/info.txt" "$W/forensics_env.txt"; cat "$W/I39/summary.json" 2>/dev/null | head -c 6000
  echo "done at +$(( $(date +%s) - T0 )) s"; ls -la "${OUT:-$W/out}"
  exit 0
elif [ "$part" = E39 ]; then  # issue 39 item 6: the recommended env's cost per step, each setting apart
  mkdir -p "${OUT:-$W/out}"
  timeout -k 10 "${HF_E39_LIMIT:-540}" python3 benchmarks/env_cost.py --backend "$backend" --ranks "${HF_E39_RANKS:-4}" \
    --rounds "${HF_E39_ROUNDS:-3}" --steps "${HF_E39_STEPS:-400}" --plugin "$SO" --json "${OUT:-$W/out}/env_cost.json" 2>&1 | tee "${OUT:-$W/out}/env_cost.txt" | tail -n 20
  cat "$W/info.txt" >>"${OUT:-$W/out}/env_cost.txt"
  echo "done at +$(( $(date +%s) - T0 )) s"; ls -la "${OUT:-$W/out}"
  exit 0
elif [ "$part" = R ]; then
  BUDGET=${HF_R_BUDGET:-535}
  cap() { local c=$1 l; l=$(( T0 + BUDGET - $(date +%s) - $2 )); [ "$l" -lt "$c" ] && c=$l; echo "$c"; }
  python3 -m forensics env >"$W/forensics_env.txt" 2>&1; python3 -m forensics recorder env >>"$W/forensics_env.txt" 2>&1
  # the recorder stamps events with CLOCK_REALTIME_COARSE (id 5): its resolution bounds straggler timing from it
  python3 -c 'import time; print("CLOCK_REALTIME_COARSE resolution s:", time.clock_getres(5))' >>"$W/info.txt" 2>&1
  if [ "$backend" = nccl ]; then common=(--backend nccl --plugin "$SO"); else common=(--backend gloo --plugin "" --world "${HF_R_WORLD:-4}"); fi
  common+=(--recorder-root /dev/shm/hf-R)
  mkdir -p "$W/R14" "$W/R15" "$W/R19"
  t=$(cap 280 170)  # leave R15 and the packing at least 170 s
  echo "R14: ${t} s cap at +$(( $(date +%s) - T0 )) s"
  [ "$t" -ge 60 ] && [ "${HF_R14:-}" != skip ] && timeout -k 15 "$t" python3 scripts/device/live_scenarios.py --out-dir "$W/R14" "${common[@]}" \
    --cases "${HF_R14:-gpusleep,oom,spawn,lateinit,dataloader,busy}" --total-s $((t - 8)) 2>&1 | tee "$W/R14/driver.log" | grep -v '^{' | tail -n 20
  t=$(cap "${HF_R15_CAP:-220}" 30)
  echo "R15: ${t} s cap at +$(( $(date +%s) - T0 )) s"
  [ "$t" -ge 40 ] && timeout -k 15 "$t" python3 scripts/device/live_scenarios.py --out-dir "$W/R15" "${common[@]}" \
    --cases "${HF_R15:-slow30,healthy,slow300,slowhost,slow5}" ${HF_R15_ROUNDS:+--rounds "$HF_R15_ROUNDS"} --total-s $((t - 8)) 2>&1 | tee "$W/R15/driver.log" | grep -v '^{' | tail -n 20
  t=$(cap 90 15); rounds=1; [ "$t" -ge 75 ] && rounds=2
  echo "R19: ${t} s cap, ${rounds} round(s) at +$(( $(date +%s) - T0 )) s"
  if [ "$t" -ge 35 ] && [ "${HF_R19:-}" != skip ]; then
    timeout -k 5 "$t" python3 benchmarks/recorder_overhead.py --ranks 2 --rounds "$rounds" --budget 0.2 --max-bytes $((16 << 20)) \
      --plugin "$SO" --backend "$backend" --json "$W/R19/overhead.json" >"$W/R19/overhead.txt" 2>&1
    echo "R19 rc=$?"; tail -n 16 "$W/R19/overhead.txt"
  else echo "skipped: ${t} s left" >"$W/R19/skipped.txt"; fi
  for f in "$W"/R14/pgids.txt "$W"/R15/pgids.txt; do  # whatever a killed driver left: by process group id
    [ -f "$f" ] && while read -r g; do kill -CONT -- "-$g" 2>/dev/null; kill -KILL -- "-$g" 2>/dev/null; done <"$f"
  done
  rm -rf /dev/shm/hf-R
  { echo "after R: +$(( $(date +%s) - T0 )) s"; nvidia-smi --query-compute-apps=pid,used_memory --format=csv 2>&1; } >>"$W/info.txt"
  timeout -k 5 60 python3 scripts/device/pack_out.py --out "$OUT" --head "$W/info.txt" --head "$W/forensics_env.txt" --head "$W/R19/overhead.txt" \
    R14="$W/R14" R15="$W/R15" R19="$W/R19" | tail -n 60
  echo "done at +$(( $(date +%s) - T0 )) s"; ls -la "$OUT"
  exit 0
elif [ "$part" = A ]; then
  timeout -k 5 150 python3 nccl_patches/device/sigstop_scenario.py --ranks 8 --victim 3 --plugin "$SO" --out "$W/recorder_sigstop8" >"$W/recorder_sigstop8.log" 2>&1
  echo "recorder sigstop: rc=$?"; tail -n 25 "$W/recorder_sigstop8.log"
  timeout -k 5 400 python3 scripts/device/nccl_scenarios.py --out-dir "$W/nccl" --total-s 380 \
    --extra-env NCCL_PROFILER_PLUGIN="$SO" --extra-env FORENSICS_RECORDER_DIR=/dev/shm/hf-recorder \
    --collect-cmd "python3 -m forensics collect --pid {pids} -o {dir} --json -q --timeout 15 --native" 2>&1 | tee "$W/nccl_scenarios.log" | tail -n 30
else
  timeout -k 5 300 python3 benchmarks/recorder_overhead.py --ranks 2 --rounds 2 --plugin "$SO" --json "$W/overhead.json" 2>&1 | tee "$W/overhead.txt" | tail -n 40
  HF_PROVOKE=1 timeout -k 5 90 bash scripts/device/host_snapshot.sh "$W/host" >"$W/host_snapshot.log" 2>&1
  echo "host snapshot rc=$?"
fi
find "$W" -name '*.log' -size +20M -exec truncate -s 20M {} \;
tar czf "$OUT/device-$part.tar.gz" -C /tmp "hf-$part"
ls -la "$OUT"
