#!/usr/bin/env bash
# Runs benchmarks/fuzz_structured.py on every core of a bigger machine (the device tool's, 16 cores):
# with N workers, worker w takes input indices START+w, START+w+N, ... (at most CHUNK of them) of one seed,
# all within BUDGET seconds, so the inputs run form one range from START and what the budget leaves undone
# is at its end; their states are summed into $OUT/fuzz_summary.json (`next_start`: every index below it
# was run; `beyond`: inputs run at or past it, which a next call from next_start runs again) and the failing
# inputs packed into $OUT/fuzz_failures.tar.gz.
#   bash scripts/device/fuzz_parallel.sh SEED START CHUNK BUDGET_S [HEAVY_MIB] [SLOW_S]
# (inputs whose peak RSS passes HEAVY_MIB, default 900, are packed too, as heavyN folders; those that take
# over SLOW_S seconds without failing, default 3, are listed under "over" and packed as slowN folders)
# 100,000 inputs in two calls: `... SEED 0 6250 480`, then `... SEED NEXT_START CHUNK2 480` with the first
# call's next_start and CHUNK2 = ceil((100000 - NEXT_START) / N); distinct inputs run in all: the second
# call's next_start - 0 plus its beyond.
# FUZZER=benchmarks/fuzz_fleet.py runs the fleet fuzzer instead (1,024-rank digests and gateway answers; each
# worker first builds its own bundle, about 5 s): `FUZZER=benchmarks/fuzz_fleet.py bash ... SEED 0 6250 480`.
# Carried: .whl (loguru, networkx, ClusterShell, py-spy, pygdbmi for Python 3.12).
set -u
FUZZER=${FUZZER:-benchmarks/fuzz_structured.py}
SEED=${1:-2}; START=${2:-0}; CHUNK=${3:-6250}; BUDGET=${4:-480}; HEAVY=${5:-900}; SLOW=${6:-3}
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit 2
export PYTHONPATH=/tmp/site:$PWD PYTHONUNBUFFERED=1
N=$(nproc); W=/tmp/fz; rm -rf "$W"; mkdir -p "$W/keep"
echo "workers $N, seed $SEED, start $START, chunk $CHUNK, budget $BUDGET s, python $(python3 -V 2>&1)"
for w in $(seq 0 $((N - 1))); do
  timeout -k 5 $((BUDGET + 40)) python3 "$FUZZER" --seed "$SEED" --start $((START + w)) \
    --stride "$N" --inputs "$CHUNK" --state "$W/state$w.json" --keep "$W/keep" --keep-heavy-mib "$HEAVY" --keep-slow-s "$SLOW" --budget-s "$BUDGET" >"$W/log$w.txt" 2>&1 &
done
wait
python3 - "$W" "$OUT/fuzz_summary.json" "$START" "$N" <<'PY'
import json, sys
from pathlib import Path
w, out, start, n = Path(sys.argv[1]), Path(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
total = {"counts": {}, "failures": [], "slowest": [0.0, None], "max_rss_mib": 0.0, "heaviest": [0.0, None], "ranges": [],
         "over": []}
for f in sorted(w.glob("state*.json")):
    s = json.loads(f.read_text())
    for k, v in s["counts"].items():
        total["counts"][k] = total["counts"].get(k, 0) + v
    total["failures"] += s["failures"]
    if s["slowest"][0] > total["slowest"][0]:
        total["slowest"] = s["slowest"]
    total["max_rss_mib"] = max(total["max_rss_mib"], s["max_rss_mib"])
    if s.get("heaviest", [0.0])[0] > total["heaviest"][0]:
        total["heaviest"] = s["heaviest"]
    total["ranges"].append([s.get("start"), s["next"]])
    total["over"] += s.get("over", [])
total["over"].sort(reverse=True)
total["inputs"] = sum(total["counts"].values())
states = [json.loads(f.read_text()) for f in sorted(w.glob("state*.json"))]
done = [s.get("done", 0) for s in states] + [0] * (n - len(states))  # a worker with no state ran nothing
total["next_start"] = start + n * min(done)
total["beyond"] = sum(d - min(done) for d in done)
out.write_text(json.dumps(total, indent=1))
print(json.dumps({k: total[k] for k in ("inputs", "next_start", "beyond", "counts", "slowest", "max_rss_mib", "heaviest")}))
print("over the slow mark:", len(total["over"]), total["over"][:10])
for f in total["failures"][:40]:
    print("FAIL", f.get("index"), f.get("outcome"), f.get("type", ""), f.get("seconds"), str(f.get("input"))[:160])
PY
tail -n 3 "$W"/log0.txt
tar czf "$OUT/fuzz_failures.tar.gz" -C "$W" keep
ls -la "$OUT"
