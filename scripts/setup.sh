#!/usr/bin/env bash
# Sets up hang-forensics on a fresh machine: system tools (when root), then a venv in .venv
# with the package (editable) and everything the demo, notebooks and tests need.
# Safe to run again: it only installs what is missing.
set -euo pipefail
cd "$(dirname "$0")/.."

say() { echo "setup: $*" >&2; }

# System tools the collectors and tests use. Only root can install them; others get a hint.
need_apt=()
command -v gdb >/dev/null 2>&1 || need_apt+=(gdb)
command -v gcc >/dev/null 2>&1 || need_apt+=(gcc)
[ -e /usr/lib/x86_64-linux-gnu/libdw.so.1 ] || command -v eu-stack >/dev/null 2>&1 || need_apt+=(elfutils)  # libdw: native stacks (forensics/collectors/libdw_stacks.py)
if [ "${#need_apt[@]}" -gt 0 ]; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
    say "installing ${need_apt[*]} with apt-get"
    apt-get update -qq >/dev/null
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${need_apt[@]}" >/dev/null
  else
    say "warning: missing ${need_apt[*]}; install them (as root: apt-get install -y ${need_apt[*]})"
  fi
fi

PY=${PYTHON:-python3}
if [ ! -x .venv/bin/python ]; then
  say "creating .venv with $($PY --version)"
  "$PY" -m venv .venv
fi
# torch is pinned to 2.13.0: on these machines that is a local CPU build; an unpinned torch pulls gigabytes.
# ruff and mypy (pinned in the test extra) run inside the test suite: tests/test_lint.py
if ! .venv/bin/python -c 'import forensics, torch, pytest, nbclient, ruff, mypy' >/dev/null 2>&1; then
  say "installing hang-forensics and its dependencies into .venv"
  .venv/bin/pip install -q --disable-pip-version-check -e '.[demo,notebook,test]' 2>&1 | grep -v -E '^WARNING: (Location|Skipping)' >&2 || true
fi
.venv/bin/python -c 'import forensics, torch' || { say "install failed"; exit 1; }
say "ready: $(.venv/bin/forensics --version), torch $(.venv/bin/python -c 'import torch; print(torch.__version__)')"
