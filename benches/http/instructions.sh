#!/usr/bin/env bash
# User-space instructions per request of the http-bench server, by mode,
# counted by callgrind: repeatable where wall-clock throughput on a shared
# machine is not. Kernel time (the socket work) is not counted, so the
# relative overhead it shows is an upper bound of the real one.
# Usage: benches/http/instructions.sh   (MODES="bare ours ..." to pick)
# Needs valgrind and wrk.
set -u
cd "$(dirname "$0")"
export CARGO_TARGET_DIR=${CARGO_TARGET_DIR:-../../target/http-bench}
cargo build --release -q
# A mode ending in -outer runs a second build, whose layers wrap the whole
# Router instead of going in with Router::layer.
CARGO_TARGET_DIR=$CARGO_TARGET_DIR-outer cargo build --release -q --features outer
binary() { case $1 in *-outer) echo "$CARGO_TARGET_DIR-outer/release/http-bench ${1%-outer}" ;; *) echo "$CARGO_TARGET_DIR/release/http-bench $1" ;; esac; }
port=38090
for mode in ${MODES:-bare ours ours-quiet governor ours-limited governor-limited}; do
  rm -f /tmp/cg.$mode.*
  TOKIO_WORKER_THREADS=1 valgrind --tool=callgrind --callgrind-out-file=/tmp/cg.$mode.%p $(binary "$mode") $port 2>/dev/null & pid=$!
  for _ in $(seq 100); do curl -s -o /dev/null "http://127.0.0.1:$port/" && break; sleep 0.2; done
  callgrind_control -z $pid >/dev/null 2>&1   # zero counters after start-up
  out=$(wrk -t1 -c8 -d8s "http://127.0.0.1:$port/")
  n=$(awk '/requests in/ {print $1}' <<<"$out")
  callgrind_control -d $pid >/dev/null 2>&1
  sleep 1
  kill -9 $pid 2>/dev/null; wait $pid 2>/dev/null
  ir=$(for f in /tmp/cg.$mode.*; do callgrind_annotate "$f" 2>/dev/null | awk '/PROGRAM TOTALS/ {gsub(",","",$1); print $1}'; done | sort -n | tail -1)
  echo "$mode requests=$n instructions=$ir per_request=$((ir / n))"
done
