#!/usr/bin/env bash
# The same app (axum-example, release) in memory and on Redis (REDIS_URL),
# run side by side: both servers on CPU 0, two wrk and redis-server on
# CPU 1, so whatever else the machine does slows both alike (as
# benches/http/pair.sh). GET /api/items (10 per client IP per minute):
#   limited:  one client IP flooding (nearly every request denied);
#   admitted: a new client IP per request (every request admitted).
# Redis variants: plain, leases of 10 and of 100 (RATELIMIT_LEASE). For
# each, the median ratio redis/memory over ROUNDS rounds and Redis's
# commands per request (INFO stats total_commands_processed, which counts
# the commands a script runs too, over the requests the Redis app served).
#
# Usage: benches/fleet/pair.sh [SECONDS_PER_ROUND] [CONNECTIONS_EACH]
#   ROUNDS=5. Needs wrk, taskset, redis-server, redis-cli. Prints Markdown.
set -euo pipefail
cd "$(dirname "$0")/../.."
secs=${1:-5}
conns=${2:-32}
rounds=${ROUNDS:-5}
for c in wrk taskset redis-server redis-cli; do
  command -v $c >/dev/null || { echo "$c not found" >&2; exit 1; }
done
cargo build --release -q -p axum-example
bin=target/release/axum-example
lua=benches/fleet/items.lua
out=$(mktemp -d)
pids=()
trap 'kill "${pids[@]}" 2>/dev/null; rm -rf "$out"' EXIT
rport=38260
taskset -c 1 redis-server --port $rport --save '' --appendonly no >"$out/redis.log" 2>&1 & pids+=($!)
for _ in $(seq 50); do redis-cli -p $rport ping >/dev/null 2>&1 && break; sleep 0.1; done

wait_up() { for _ in $(seq 100); do curl -s -o /dev/null "http://127.0.0.1:$1/health" && return; sleep 0.05; done; echo "app on $1 did not start" >&2; exit 1; }
rps() { awk '/Requests\/sec/ {print $2}' "$1"; }
reqs() { awk '/requests in/ {print $1}' "$1"; }
cmds() { redis-cli -p $rport info stats | awk -F: '/^total_commands_processed/ {print $2+0}'; }
median() { sort -n | awk '{a[NR]=$1} END{print (NR%2) ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2}'; }
app() { # port [env...]
  local port=$1; shift
  env "$@" BIND_ADDR=127.0.0.1:$port TRUSTED_PROXIES=127.0.0.1/32 RUST_LOG=error \
    TOKIO_WORKER_THREADS=1 taskset -c 0 "$bin" >/dev/null 2>&1 & pids+=($!)
}

echo "| path | Redis app | redis / memory (median of $rounds) | min | max | memory req/s | redis req/s | Redis commands per request |"
echo "|---|---|---:|---:|---:|---:|---:|---:|"
for path in limited admitted; do
  mode=$([ $path = limited ] && echo same || echo distinct)
  for lease in none 10 100; do
    : >"$out/r"
    for round in $(seq "$rounds"); do
      redis-cli -p $rport flushall >/dev/null
      extra=()
      [ $lease != none ] && extra=(RATELIMIT_LEASE=$lease)
      app 38250; a=${pids[-1]}
      app 38251 REDIS_URL=redis://127.0.0.1:$rport/ "${extra[@]}"; b=${pids[-1]}
      wait_up 38250; wait_up 38251
      # Connect the Redis app's stores before counting.
      curl -s -o /dev/null -H 'X-Forwarded-For: 198.18.0.1' http://127.0.0.1:38251/api/items
      c0=$(cmds)
      MODE=$mode taskset -c 1 wrk -t1 -c"$conns" -d"${secs}s" -s $lua http://127.0.0.1:38250 >"$out/a" & wa=$!
      MODE=$mode taskset -c 1 wrk -t1 -c"$conns" -d"${secs}s" -s $lua http://127.0.0.1:38251 >"$out/b" & wb=$!
      wait "$wa" "$wb"
      c1=$(cmds)
      kill "$a" "$b"; wait "$a" "$b" 2>/dev/null || true
      echo "$(rps "$out/a") $(rps "$out/b") $(( c1 - c0 - 1 )) $(reqs "$out/b")" >>"$out/r"
      echo "round $round $path lease=$lease: memory $(rps "$out/a") req/s, redis $(rps "$out/b") req/s, $(( c1 - c0 - 1 )) commands for $(reqs "$out/b") requests" >&2
    done
    ratio=$(awk '{print $2 / $1}' "$out/r" | median)
    lo=$(awk '{print $2 / $1}' "$out/r" | sort -n | head -1)
    hi=$(awk '{print $2 / $1}' "$out/r" | sort -n | tail -1)
    mem=$(awk '{print $1}' "$out/r" | median)
    red=$(awk '{print $2}' "$out/r" | median)
    cpr=$(awk '{print $3 / $4}' "$out/r" | median)
    label=$([ $lease = none ] && echo "plain (deny cache)" || echo "lease $lease")
    printf "| %s | %s | %.3f | %.3f | %.3f | %.0f | %.0f | %.4f |\n" "$path" "$label" "$ratio" "$lo" "$hi" "$mem" "$red" "$cpr"
  done
done
