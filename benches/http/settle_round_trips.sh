#!/usr/bin/env bash
# Redis round trips per request of POST /v1/chat (two limits, the tokens
# one settled from x-tokens-used) against GET /api/items (one limit, not
# settled), counted by the redis-server's own commandstats (EVALSHA calls).
# Usage: benches/http/settle_round_trips.sh   (N=100 requests per case)
# Needs redis-server, redis-cli, curl; builds axum-example.
set -eu
cd "$(dirname "$0")/../.."
cargo build -q -p axum-example
bin=${CARGO_TARGET_DIR:-target}/debug/axum-example
n=${N:-100}
free() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
rp=$(free); ap=$(free)
redis-server --port "$rp" --save '' --appendonly no >/dev/null 2>&1 & redis=$!
sleep 0.5
BIND_ADDR=127.0.0.1:$ap REDIS_URL=redis://127.0.0.1:$rp API_KEYS=k1,k2 "$bin" 2>/dev/null & app=$!
trap 'kill $app $redis' EXIT
sleep 2
calls() { redis-cli -p "$rp" info commandstats | tr -d '\r' | awk -F'[=,]' '/cmdstat_evalsha/ {print $2}'; }
chat() { curl -s -o /dev/null -H 'x-api-key: k1' "$@" 127.0.0.1:$ap/v1/chat; }
items() { curl -s -o /dev/null -H 'x-api-key: k2' 127.0.0.1:$ap/api/items; }
chat -d '{"tokens": 1}'; items   # connect the stores
case_() { # name, then the command of one request
  local name=$1; shift
  local before; before=$(calls)
  for _ in $(seq "$n"); do "$@"; done
  local after; after=$(calls)
  echo "$name requests=$n round_trips=$((after - before)) per_request=$(awk -v d=$((after - before)) -v n="$n" 'BEGIN {printf "%.2f", d / n}')"
}
case_ settled-up chat -d '{"tokens": 10}'
case_ settled-equal chat -H 'x-max-tokens: 1' -d '{"tokens": 1}'
case_ plain-one-limit items
