#!/bin/sh
# Benchmark/test-only stand-in for ssh (never on the production path: passed as ssh_path).
# ClusterShell runs it as `ssh [options] HOST COMMAND`; it ignores all of that, waits
# $FORENSICS_STANDIN_LATENCY seconds and prints the real, wire-encoded host answer in
# $FORENSICS_STANDIN_ANSWER, as the remote collector would after collecting.
sleep "${FORENSICS_STANDIN_LATENCY:-1}"
exec cat "$FORENSICS_STANDIN_ANSWER"
