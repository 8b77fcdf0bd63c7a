#!/usr/bin/env bash
# A real torchrun --tee console of an NCCL hang (scripts/device/tee_worker.py): 4 workers on one GPU,
# rank 2 never joins the 4th all_reduce, the others' watchdogs time out after PG_TIMEOUT s and abort
# (faulthandler dumps), torchelastic reports the failures. Everything lands in $OUT/tee_console.tar.gz.
set -u
out=${OUT:-/tmp/out}
work=$(mktemp -d)
export NCCL_SOCKET_IFNAME=lo NCCL_IB_DISABLE=1 NCCL_NVLS_ENABLE=0 PYTHONFAULTHANDLER=1 PG_TIMEOUT=${PG_TIMEOUT:-20}
export CULPRIT=2 TORCH_NCCL_DEBUG_INFO_TEMP_FILE="$work/nccl_trace_rank_" NCCL_DEBUG=WARN
python3 -c "import sys, torch; print('python', sys.version.split()[0], 'torch', torch.__version__, 'nccl', torch.cuda.nccl.version())" \
  > "$work/versions.txt" 2>&1
timeout 240 torchrun --standalone --nproc-per-node 4 --tee 3 scripts/device/tee_worker.py > "$work/console.txt" 2>&1
echo "torchrun exit $?" >> "$work/versions.txt"
pkill -f tee_worker.py || true
tar -C "$work" -czf "$out/tee_console.tar.gz" .
tail -40 "$work/console.txt"
cat "$work/versions.txt"
