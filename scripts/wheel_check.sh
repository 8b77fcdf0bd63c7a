#!/usr/bin/env bash
# Build the wheel from this checkout and install it into a new, empty virtual environment, then run the
# installed `forensics` on a fixture: what docs/deploy.md tells a user to do, checked (CI runs it: .ci/run).
#
# Cheap by construction: the wheel is built with the checkout's .venv (no build isolation, nothing fetched
# for the build), and the clean venv takes the base dependencies from the wheels pip already cached when
# scripts/setup.sh ran (--prefer-binary; a cold cache downloads them once).
#
#   bash scripts/wheel_check.sh            # needs .venv (bash scripts/setup.sh)
set -euo pipefail

repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
work="$(mktemp -d "${TMPDIR:-/tmp}/wheel-check.XXXXXX")"
trap 'rm -rf -- "$work"' EXIT

"$repo/.venv/bin/python" -m pip wheel --quiet --no-deps --no-build-isolation -w "$work/dist" "$repo"
wheel="$(ls "$work"/dist/hang_forensics-*.whl)"
python3 -m venv "$work/venv"
"$work/venv/bin/python" -m pip install --quiet --prefer-binary "$wheel"
cd "$work"  # not the checkout: the installed package, not the source tree, must answer
"$work/venv/bin/forensics" --version
"$work/venv/bin/forensics" help analyze > /dev/null
rc=0
"$work/venv/bin/forensics" analyze "$repo/tests/fixtures/nccl/sigstop/bundle" > "$work/verdict.txt" || rc=$?
head -n 1 "$work/verdict.txt"
[ "$rc" -eq 0 ] && grep -q '^VERDICT: rank 3 ' "$work/verdict.txt"
echo "wheel check: $(basename "$wheel") installs into a clean venv and names the culprit"
