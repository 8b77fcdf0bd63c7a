#!/usr/bin/env bash
# Terminal captures (tmux capture-pane) of what a person sees at 60, 100 and 200 columns (issue 41):
#   demo-COLS.txt        `forensics demo` (a real 4-rank gloo job, rank 2 slow)
#   xid512-COLS.txt      `forensics analyze` and `forensics hosts` on a logs-only 512-rank job
#                        (tests/logs_job.py, rank 347 on node043 one collective behind) with a real Xid 79 line
#                        (tests/fixtures/host/kernel/public-gpu-faults.log) in kernel.log of node007, node031, node032
#   xid512-own-COLS.txt  the same with the Xid 79 on node043, the culprit's own host
# written to docs/captures/ (or $1). Needs tmux and the checkout's .venv.
set -euo pipefail

repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
out="${1:-$repo/docs/captures}"
work="$(mktemp -d "${TMPDIR:-/tmp}/captures.XXXXXX")"
session="captures-$$"
trap 'tmux kill-session -t "$session" 2>/dev/null || true; rm -rf -- "$work"' EXIT
mkdir -p "$out"
py="$repo/.venv/bin/python"
fx="$repo/.venv/bin/forensics"

job() {  # job FOLDER HOST...: the 512-rank logs folder, the Xid 79 line in each HOST's kernel.log
    local root="$1"; shift
    PYTHONPATH="$repo/tests" "$py" -c "import sys; from pathlib import Path; from logs_job import write_job; write_job(Path(sys.argv[1]))" "$root"
    for host in "$@"; do
        grep -m1 '79, GPU has fallen off the bus' "$repo/tests/fixtures/host/kernel/public-gpu-faults.log" > "$root/$host/kernel.log"
    done
}
job "$work/xid512" node007 node031 node032
job "$work/xid512-own" node043 node007

capture() {  # capture NAME COLS COMMAND: run COMMAND in a COLS-wide tmux pane, save the whole scrollback
    local name="$1" cols="$2" cmd="$3"
    tmux new-session -d -s "$session" -x "$cols" -y 60 -c "$work"
    tmux set-option -t "$session" history-limit 20000 > /dev/null
    tmux send-keys -t "$session" "clear; $cmd; echo __done__" Enter
    for _ in $(seq 1 240); do
        sleep 1
        tmux capture-pane -p -t "$session" -S - | grep -q '^__done__' && break
    done
    tmux capture-pane -p -t "$session" -S - | sed '/^__done__/,$d' | sed -e :a -e '/^\n*$/{$d;N;ba' -e '}' > "$out/$name-$cols.txt"
    tmux kill-session -t "$session"
}

for cols in 60 100 200; do
    capture demo "$cols" "$fx demo -o $work/demo-$cols -q"
    capture xid512 "$cols" "$fx analyze --no-tree xid512; $fx hosts xid512"
    capture xid512-own "$cols" "$fx analyze --no-tree xid512-own"
done
ls "$out"
