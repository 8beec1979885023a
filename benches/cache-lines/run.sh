#!/usr/bin/env bash
# Cache lines a keyed check writes, by path: valgrind's lackey traces every
# store of `check_paths` (crates/ratelimit-core/examples/check_paths.rs)
# and lines.py counts the 64-byte lines written during the check loop,
# sorted into the thread's stack, the thread's own memory beside it (its
# thread-locals) and memory other threads reach (the store).
#
# Usage: benches/cache-lines/run.sh   (CHECKS=20000 KEYS="1 10000")
# Needs valgrind and python3. 1,000,000 keys make a trace too large to keep.
set -euo pipefail
cd "$(dirname "$0")/../.."
checks=${CHECKS:-20000}
cargo build --release -q -p ratelimit-core --example check_paths
bin=${CARGO_TARGET_DIR:-target}/release/examples/check_paths
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
for path in allowed denied; do
  for keys in ${KEYS:-1 10000}; do
    for threads in 1 2; do
      for clock in system frozen; do
        valgrind --tool=lackey --trace-mem=yes --log-file="$out/trace" \
          "$bin" "$path" "$keys" "$threads" "$clock" "$checks" 2>"$out/marks"
        echo "$path, $keys keys, $threads threads, $clock clock:"
        python3 benches/cache-lines/lines.py "$checks" "$out/marks" <"$out/trace"
      done
    done
  done
done
