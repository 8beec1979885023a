#!/usr/bin/env bash
# HTTP load: the same axum app bare, with tower-ratelimit and with
# tower_governor, admitting everything and limiting almost everything.
# Usage: benches/http/run.sh [DURATION_SECONDS] [CONNECTIONS]
# Needs wrk (Debian package `wrk`). Prints a Markdown table.
set -euo pipefail
cd "$(dirname "$0")"
secs=${1:-10}
conns=${2:-64}
rounds=${ROUNDS:-2}
command -v wrk >/dev/null || { echo "wrk not found: apt-get install wrk" >&2; exit 1; }
export CARGO_TARGET_DIR=${CARGO_TARGET_DIR:-../../target/http-bench}
cargo build --release -q
bin=$CARGO_TARGET_DIR/release/http-bench
port=38080
declare -A rps p99 non2xx
for round in $(seq "$rounds"); do
  for mode in bare ours governor ours-limited governor-limited; do
    "$bin" "$mode" "$port" & pid=$!
    for _ in $(seq 50); do curl -s -o /dev/null "http://127.0.0.1:$port/" && break; sleep 0.1; done
    out=$(wrk -t1 -c"$conns" -d"${secs}s" --latency "http://127.0.0.1:$port/")
    kill "$pid"; wait "$pid" 2>/dev/null || true
    r=$(awk '/Requests\/sec/ {print $2}' <<<"$out")
    l=$(awk '$1=="99%" {print $2}' <<<"$out")
    n=$(awk '/Non-2xx/ {print $5}' <<<"$out"); n=${n:-0}
    echo "round $round $mode: $r req/s, p99 $l, non-2xx $n" >&2
    # Keep the best round of each mode (least disturbed by other load).
    if [[ -z "${rps[$mode]:-}" ]] || awk -v a="$r" -v b="${rps[$mode]}" 'BEGIN{exit !(a>b)}'; then
      rps[$mode]=$r; p99[$mode]=$l; non2xx[$mode]=$n
    fi
  done
done
echo "| app | req/s | vs bare | p99 latency | non-2xx |"
echo "|---|---:|---:|---:|---:|"
for mode in bare ours governor ours-limited governor-limited; do
  ratio=$(awk -v a="${rps[$mode]}" -v b="${rps[bare]}" 'BEGIN{printf "%.2f", a/b}')
  echo "| $mode | ${rps[$mode]} | $ratio | ${p99[$mode]} | ${non2xx[$mode]} |"
done
