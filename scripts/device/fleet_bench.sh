set -u
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target /tmp/site .whl/*.whl || exit 2
export PYTHONPATH=/tmp/site:$PWD PATH=/tmp/site/bin:$PATH
nproc; uptime; python3 -c 'import os; print("cpu_count", os.cpu_count())'
for w in default 0 2 4 8; do
  if [ $w = default ]; then a=""; else a="--filing-workers $w"; fi
  echo "== filing workers: $w"
  timeout 120 python3 benchmarks/fleet_fanout.py --sizes 4096 --gateways 0 $a 2>&1 | tail -n 3
done
echo "== tree"
timeout 150 python3 benchmarks/fleet_fanout.py --sizes 4096 --gateways 8 2>&1 | tail -n 3
echo "== flat default again"
timeout 120 python3 benchmarks/fleet_fanout.py --sizes 4096 --gateways 0 2>&1 | tail -n 3
