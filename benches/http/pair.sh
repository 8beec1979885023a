#!/usr/bin/env bash
# Paired HTTP load: each mode runs at the same time as the baseline, both
# servers on CPU 0 and two wrk on CPU 1, so that whatever else the machine
# is doing slows both alike. The ratio mode/baseline of one round is then
# far steadier than in sequential runs (./run.sh): on a shared 2-core VM,
# bare against bare gave per-round ratios within 0.97-1.03 here, against
# 0.55-1.32 sequentially.
#
# Usage: benches/http/pair.sh [SECONDS_PER_ROUND] [CONNECTIONS_EACH]
#   MODES="ours governor ..." (default below), BASE=bare, ROUNDS=8.
# Needs wrk (Debian package `wrk`) and taskset. Prints a Markdown table.
set -euo pipefail
cd "$(dirname "$0")"
secs=${1:-3}
conns=${2:-32}
rounds=${ROUNDS:-8}
base=${BASE:-bare}
modes=(${MODES:-bare noop ours ours-quiet governor ours-limited governor-limited})
command -v wrk >/dev/null || { echo "wrk not found: apt-get install wrk" >&2; exit 1; }
export CARGO_TARGET_DIR=${CARGO_TARGET_DIR:-../../target/http-bench}
cargo build --release -q
bin=$CARGO_TARGET_DIR/release/http-bench
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
wait_up() { for _ in $(seq 50); do curl -s -o /dev/null "http://127.0.0.1:$1/" && return; sleep 0.1; done; }
rps() { awk '/Requests\/sec/ {print $2}' "$1"; }
echo "| $base vs mode, run together | mode / $base (median of $rounds rounds) | mean | sd | min | max | req/s of mode (median) |"
echo "|---|---:|---:|---:|---:|---:|---:|"
for mode in "${modes[@]}"; do
  : >"$out/ratios"
  for round in $(seq "$rounds"); do
    TOKIO_WORKER_THREADS=1 taskset -c 0 "$bin" "$base" 38150 & a=$!
    TOKIO_WORKER_THREADS=1 taskset -c 0 "$bin" "$mode" 38151 & b=$!
    wait_up 38150; wait_up 38151
    taskset -c 1 wrk -t1 -c"$conns" -d"${secs}s" http://127.0.0.1:38150/ >"$out/a" & wa=$!
    taskset -c 1 wrk -t1 -c"$conns" -d"${secs}s" http://127.0.0.1:38151/ >"$out/b" & wb=$!
    wait "$wa" "$wb"
    kill "$a" "$b"; wait "$a" "$b" 2>/dev/null || true
    echo "$(rps "$out/b") $(rps "$out/a")" >>"$out/ratios"
    echo "round $round $mode: $(rps "$out/b") req/s, $base $(rps "$out/a") req/s" >&2
  done
  q=$(awk '{print $1}' "$out/ratios" | sort -n | awk '{a[NR]=$1} END{print (NR%2) ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2}')
  awk '{print $1 / $2}' "$out/ratios" | sort -n | awk -v m="$mode" -v q="$q" '
    { r[NR] = $1; s += $1 }
    END {
      mean = s / NR
      for (i = 1; i <= NR; i++) v += (r[i] - mean) ^ 2
      med = (NR % 2) ? r[(NR + 1) / 2] : (r[NR / 2] + r[NR / 2 + 1]) / 2
      printf "| %s | %.3f | %.3f | %.3f | %.3f | %.3f | %.0f |\n", m, med, mean, sqrt(v / NR), r[1], r[NR], q
    }'
done
