#!/usr/bin/env bash
# Real torchrun --tee consoles of NCCL hangs (scripts/device/tee_worker.py): 4 workers on one GPU; rank 2
# never joins the 4th all_reduce (sleep) or calls a broadcast from another function there (diverge); the
# watchdogs time out after PG_TIMEOUT s and abort (faulthandler dumps), torchelastic reports the failures.
# Usage: tee_console.sh [SCENARIO...] (default: sleep). Everything lands in $OUT/tee_console.tar.gz.
set -u
out=${OUT:-/tmp/out}
work=$(mktemp -d)
export NCCL_SOCKET_IFNAME=lo NCCL_IB_DISABLE=1 NCCL_NVLS_ENABLE=0 PYTHONFAULTHANDLER=1 PG_TIMEOUT=${PG_TIMEOUT:-20}
export CULPRIT=2 NCCL_DEBUG=WARN
python3 -c "import sys, torch; print('python', sys.version.split()[0], 'torch', torch.__version__, 'nccl', torch.cuda.nccl.version())" \
  > "$work/versions.txt" 2>&1
for scenario in "${@:-sleep}"; do
  mkdir -p "$work/$scenario"
  SCENARIO=$scenario TORCH_NCCL_DEBUG_INFO_TEMP_FILE="$work/$scenario/nccl_trace_rank_" timeout 240 \
    torchrun --standalone --nproc-per-node 4 --tee 3 scripts/device/tee_worker.py > "$work/$scenario/console.txt" 2>&1
  echo "$scenario: torchrun exit $?" >> "$work/versions.txt"
  pkill -f tee_worker.py || true
  grep -c . "$work/$scenario/console.txt"
done
tar -C "$work" -czf "$out/tee_console.tar.gz" .
cat "$work/versions.txt"
