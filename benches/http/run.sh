#!/usr/bin/env bash
# HTTP load: the same axum app bare, with tower-ratelimit and with
# tower_governor, admitting everything and limiting almost everything.
#
# Usage: benches/http/run.sh [SECONDS_PER_RUN] [CONNECTIONS]   (ROUNDS=5 by default)
#
# The server runs on CPU 0 with one tokio worker, wrk on CPU 1 with one
# thread, so the two don't fight over a core. The modes are interleaved
# round by round and each cell is the median over the rounds. Needs wrk
# (Debian package `wrk`) and taskset. Prints a Markdown table.
set -euo pipefail
cd "$(dirname "$0")"
secs=${1:-5}
conns=${2:-64}
rounds=${ROUNDS:-5}
modes=(${MODES:-bare ours governor ours-limited governor-limited})
command -v wrk >/dev/null || { echo "wrk not found: apt-get install wrk" >&2; exit 1; }
export CARGO_TARGET_DIR=${CARGO_TARGET_DIR:-../../target/http-bench}
cargo build --release -q
# A mode ending in -outer runs a second build, whose layers wrap the whole
# Router instead of going in with Router::layer.
CARGO_TARGET_DIR=$CARGO_TARGET_DIR-outer cargo build --release -q --features outer
binary() { case $1 in *-outer) echo "$CARGO_TARGET_DIR-outer/release/http-bench ${1%-outer}" ;; *) echo "$CARGO_TARGET_DIR/release/http-bench $1" ;; esac; }
port=38080
results=$(mktemp)
trap 'rm -f "$results"' EXIT
for round in $(seq "$rounds"); do
  for mode in "${modes[@]}"; do
    TOKIO_WORKER_THREADS=1 taskset -c 0 $(binary "$mode") "$port" & pid=$!
    for _ in $(seq 50); do curl -s -o /dev/null "http://127.0.0.1:$port/" && break; sleep 0.1; done
    out=$(taskset -c 1 wrk -t1 -c"$conns" -d"${secs}s" --latency "http://127.0.0.1:$port/")
    kill "$pid"; wait "$pid" 2>/dev/null || true
    r=$(awk '/Requests\/sec/ {print $2}' <<<"$out")
    l=$(awk '$1=="99%" {print $2}' <<<"$out")
    n=$(awk '/Non-2xx/ {print $5}' <<<"$out"); n=${n:-0}
    echo "round $round $mode: $r req/s, p99 $l, non-2xx $n" >&2
    # p99 in microseconds for the median.
    us=$(awk -v l="$l" 'BEGIN{v=l+0; if (l ~ /us$/) print v; else if (l ~ /ms$/) print v*1000; else print v*1000000}')
    echo "$mode $r $us $n $round" >>"$results"
  done
done
median() { sort -n | awk '{a[NR]=$1} END{print (NR%2) ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2}'; }
# "vs bare" is the median over rounds of (mode / bare in the same round):
# a round takes under a minute, so slow drifts of the machine cancel out.
ratio() {
  awk -v m="$1" -v d="$2" '$1==d{b[$5]=$2} $1==m{x[$5]=$2} END{for (r in x) if (r in b) print x[r]/b[r]}' "$results" | median
}
echo "| app | req/s (median of $rounds) | vs bare (median of per-round ratios) | p99 latency (median) | responses not 2xx (last run) |"
echo "|---|---:|---:|---:|---:|"
for mode in "${modes[@]}"; do
  r=$(awk -v m="$mode" '$1==m{print $2}' "$results" | median)
  us=$(awk -v m="$mode" '$1==m{print $3}' "$results" | median)
  n=$(awk -v m="$mode" '$1==m{n=$4} END{print n}' "$results")
  q=$(ratio "$mode" bare)
  awk -v m="$mode" -v r="$r" -v q="$q" -v us="$us" -v n="$n" \
    'BEGIN{printf "| %s | %.0f | %.2f | %.2f ms | %s |\n", m, r, q, us/1000, n}'
done
if [[ " ${modes[*]} " == *" governor "* && " ${modes[*]} " == *" ours "* ]]; then
  echo
  echo "ours / governor, median of per-round ratios: admitted $(ratio ours governor), limited $(ratio ours-limited governor-limited)"
fi
