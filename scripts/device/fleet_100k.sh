#!/usr/bin/env bash
# Issue 30 item 4 on the device machine (16 cores, no sshd): a simulated job of 8 ranks a host, 4,096 /
# 32,768 / 100,000 ranks (512 / 4,096 / 12,500 hosts), collect to verdict through the C stand-in ssh
# (benchmarks/standin_ssh.c: waits 1 s, prints that host's real answer; for a gateway it execs the real
# `python -m forensics.fleet.reduce gateway` here, as sshd would there). benchmarks/fleet_digest_tree.py runs:
# - the reduced tree as a user runs it: `python -m forensics collect --hosts node[...] --gateways gw[00-15]
#   --reduce --json` (a fresh process; its peak RSS its own; last answer = its progress line for the last gateway;
#   verdict = its exit with the JSON printed);
# - the flat digest-first baseline (collect_fleet with fan-out 1024, then analyze digest first), and the flat
#   full read where the budget leaves room (100k full read last: it runs only if its estimate fits).
# The tree: 16 gateways at every size (the one tree a site configures for its 12,500 nodes: ~782 hosts a
# gateway, 256 ssh at once on each, so 4 rounds of the 1 s latency; on this machine the 16 gateways share the
# 16 cores with every stand-in, on a fleet each is its own machine).
# Rows run in priority order; each row and the answers of each size are skipped when their estimate (scaled
# from the last size run) does not fit the budget, and a row that overruns is killed with its process group:
# both are recorded, nothing is lost. Out: $OUT/fleet_100k.json (every field) and $OUT/fleet_100k.txt (table).
#   [FLEET_ROWS=100000:cli] bash scripts/device/fleet_100k.sh [BUDGET_S=460] [full|small]
# `small` (512 and 4,096 ranks, 4 gateways) is the local check on a 2-core machine. PY and SITE choose the
# python and where the carried wheels (.whl: loguru, networkx, ClusterShell, py-spy, pygdbmi; networkx 3.7 needs
# Python 3.12) are installed; INSTALL=0 skips the install (a python that has them, e.g. the project's venv).
set -u
BUDGET=${1:-460}; SCALE=${2:-full}
PY=${PY:-python3}; SITE=${SITE:-/tmp/site}; INSTALL=${INSTALL:-1}
: "${OUT:?set OUT to the folder for the results}"
mkdir -p "$OUT"
if [ "$INSTALL" = 1 ]; then
  "$PY" -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target "$SITE" .whl/*.whl || exit 2
fi
export PYTHONPATH=$SITE:$PWD PATH=$SITE/bin:$PATH PYTHONUNBUFFERED=1
ulimit -n 65536 2>/dev/null || ulimit -n "$(ulimit -Hn)" 2>/dev/null  # flat fan-out 1024: ~3 pipes an ssh
echo "cpus $(nproc), $("$PY" -V 2>&1), open files $(ulimit -n), $(uptime)"
df -h /dev/shm /tmp 2>/dev/null | sed 's/^/  /'
if [ "$SCALE" = small ]; then
  ROWS=512:cli,512:digest,512:full,4096:cli,4096:digest,4096:full; GW=4; GWFAN=64
else
  ROWS=4096:cli,4096:digest,4096:full,32768:cli,100000:cli,32768:digest,100000:digest,32768:full,100000:full
  GW=16; GWFAN=256
fi
ROWS=${FLEET_ROWS:-$ROWS}  # e.g. FLEET_ROWS=100000:cli: the one row that says whether the tree regressed
# the driver keeps its own budget; this outer limit only catches a hang of the driver itself
timeout -k 5 $((${BUDGET%.*} + 45)) "$PY" benchmarks/fleet_digest_tree.py --rows "$ROWS" --gateways $GW \
  --fanout 1024 --gateway-fanout $GWFAN --budget-s "$BUDGET" --json-out "$OUT/fleet_100k.json" \
  --table-out "$OUT/fleet_100k.txt" >"$OUT/fleet_100k.log" 2>&1
echo "driver exit $?"
tail -n 5 "$OUT/fleet_100k.log" | cut -c1-400
cat "$OUT/fleet_100k.txt"
