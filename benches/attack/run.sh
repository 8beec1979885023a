#!/usr/bin/env bash
# Attack benchmark: axum-example (release) under key floods.
#
# 1. Cap of CAP keys (RATELIMIT_MAX_KEYS): POST /accounts flooded from one
#    client IP ("same"), then from 3 x CAP distinct client IPs cycled
#    ("distinct", via X-Forwarded-For from a trusted proxy). For each:
#    flood req/s, /health p50/p99 measured at the same time by a second
#    wrk with one connection, and the server's RSS before, at the end of
#    the flood and after IDLE seconds idle. Then a brand-new client sends
#    three POST /accounts (2 per day: expect 201 201 429).
# 2. Memory per key: a fresh server, N distinct bearer tokens on
#    POST /tickets, each request carrying a PAD-byte unrelated header;
#    tokens of 32 and of 4,096 bytes. RSS growth / N.
#
# Usage: benches/attack/run.sh   (SECS=10 CAP=20000 N=100000 IDLE=5)
# Needs wrk (Debian package `wrk`) and taskset. Prints Markdown tables.
set -euo pipefail
cd "$(dirname "$0")/../.."
secs=${SECS:-10}
cap=${CAP:-20000}
n=${N:-100000}
idle=${IDLE:-5}
port=38190
command -v wrk >/dev/null || { echo "wrk not found: apt-get install wrk" >&2; exit 1; }
cargo build --release -q -p axum-example
bin=target/release/axum-example
lua=benches/attack/flood.lua
out=$(mktemp -d)
server=""
trap '[ -n "$server" ] && kill $server 2>/dev/null; rm -rf "$out"' EXIT

rss_kb() { awk '/^VmRSS/ {print $2}' "/proc/$1/status"; }
start() {
  RATELIMIT_MAX_KEYS=$1 TRUSTED_PROXIES=127.0.0.1/32 BIND_ADDR=127.0.0.1:$port RUST_LOG=warn \
    taskset -c 0 "$bin" 2>"$out/server.log" & server=$!
  for _ in $(seq 100); do curl -s -o /dev/null "http://127.0.0.1:$port/health" && return; sleep 0.05; done
  echo "server did not start" >&2; cat "$out/server.log" >&2; exit 1
}
stop() { kill "$server"; wait "$server" 2>/dev/null || true; server=""; }
rps() { awk '/Requests\/sec/ {print $2}' "$1"; }
pct() { awk -v p="$2" '$1 == p"%" {print $2}' "$1"; }
flood() { # mode keys token_len pad -> $out/flood, $out/health
  MODE=$1 KEYS=$2 TOKEN_LEN=$3 PAD=$4 THREADS=1 taskset -c 1 \
    wrk -t1 -c32 -d"${secs}s" -s "$lua" "http://127.0.0.1:$port" >"$out/flood" & f=$!
  taskset -c 1 wrk -t1 -c1 -d"${secs}s" --latency "http://127.0.0.1:$port/health" >"$out/health" & h=$!
  wait "$f" "$h"
}

echo "### Key flood at a cap of $cap keys ($secs s each, 32 connections; /health on 1 connection alongside)"
echo
echo "| flood | keys | flood req/s | /health p50 | /health p99 | RSS before | RSS at end | RSS after ${idle} s idle | new client |"
echo "|---|---:|---:|---:|---:|---:|---:|---:|---|"
for mode in same distinct; do
  start "$cap"
  before=$(rss_kb "$server")
  keys=$([ "$mode" = same ] && echo 1 || echo $((3 * cap)))
  flood "$mode" "$keys" 0 0
  during=$(rss_kb "$server")
  sleep "$idle"
  after=$(rss_kb "$server")
  codes=""
  for _ in 1 2 3; do
    codes+="$(curl -s -o /dev/null -w '%{http_code}' -X POST -H 'X-Forwarded-For: 198.51.100.77' \
      "http://127.0.0.1:$port/accounts") "
  done
  stop
  echo "| $mode | $keys | $(rps "$out/flood") | $(pct "$out/health" 50) | $(pct "$out/health" 99) | $((before / 1024)) MB | $((during / 1024)) MB | $((after / 1024)) MB | ${codes% } |"
done

echo
echo "### Memory per key: $n distinct bearer tokens, each request with a 16 KB unrelated header"
echo
echo "| token bytes | requests sent | RSS before | RSS after | RSS per key |"
echo "|---:|---:|---:|---:|---:|"
for len in 32 4096; do
  start 1000000
  before=$(rss_kb "$server")
  # Long enough to send every token at least once.
  MODE=bearer KEYS=$n TOKEN_LEN=$len PAD=16384 THREADS=1 taskset -c 1 \
    wrk -t1 -c32 -d"$((secs * 3))s" -s "$lua" "http://127.0.0.1:$port" >"$out/flood"
  sent=$(awk '/requests in/ {print $1}' "$out/flood")
  after=$(rss_kb "$server")
  stop
  keys=$(( sent < n ? sent : n ))
  echo "| $len | $sent | $((before / 1024)) MB | $((after / 1024)) MB | $(( (after - before) * 1024 / keys )) B |"
done
