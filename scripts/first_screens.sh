#!/usr/bin/env bash
# The first screen of `forensics analyze` on five kinds of input, as a user who redirects it to a
# file sees it (issue 27): a stopped rank, a killed rank, a collective mismatch with no culprit
# named, a loose folder holding one real Xid 79 line, and a straggler. Each is written to a FILE
# (stdout is not a terminal: nothing may be cut), then its first 25 lines are printed with the
# exit code. Inputs are the repository's own fixtures; the Xid 79 folder is made in a temp folder.
#
#   scripts/first_screens.sh            # uses $PYTHON (default: python3) and the checkout it lives in
set -euo pipefail

repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
python="${PYTHON:-python3}"
fixtures="$repo/tests/fixtures"
work="$(mktemp -d "${TMPDIR:-/tmp}/first-screens.XXXXXX")"
trap 'rm -rf -- "$work"' EXIT

# a loose folder as a user copies it off a node: one real Xid 79 line (from a public thread) in kernel.log
mkdir -p "$work/xid79/gpu-node-7"
grep -m1 '79, GPU has fallen off the bus' "$fixtures/host/kernel/public-gpu-faults.log" > "$work/xid79/gpu-node-7/kernel.log"

screen() {
    local title="$1"; shift
    local out="$work/screen.txt"
    local rc=0
    PYTHONPATH="$repo${PYTHONPATH:+:$PYTHONPATH}" "$python" -m forensics analyze "$@" > "$out" 2> "$work/stderr.txt" || rc=$?
    echo "=== $title: forensics analyze ${*#$repo/}  (exit $rc)"
    head -n 25 "$out"
    echo
}

screen "stopped rank (SIGSTOP, 8 ranks, NCCL)" "$fixtures/nccl/sigstop/bundle"
screen "killed rank (SIGKILL, 8 ranks, NCCL)" "$fixtures/nccl/kill/bundle"
screen "mismatch with no culprit named (torchrun --tee console, NCCL)" "$fixtures/nccl_tee/diverge"
screen "loose Xid 79 folder" "$work/xid79"
screen "straggler (step series of 4 ranks, rank 2 late)" "$fixtures/straggler/straggle"
