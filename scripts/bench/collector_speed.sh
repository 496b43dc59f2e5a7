#!/usr/bin/env bash
# What peak collections cost where users feel them: the recipes' wall time and
# a REPL session's, with peak collections off (LT_PEAK_COLLECT=0: the collector
# alone, as lt ran before them) and on, alternating, median of REPEATS, 1 thread.
# The REPL session is scripts/bench/repl_session.lua fed line by line to
# `lt -i`, as typed at the prompt.
#   scripts/bench/collector_speed.sh [REPEATS]
set -euo pipefail
cd "$(dirname "$0")/../.."
lt=${LT:-build/lt}
[ -x "$lt" ] || bash scripts/setup.sh build >/dev/null
repeats=${1:-5}
data=/usr/share/datasets/fashion-mnist
cases=(
  "mlp recipe, 1 epoch|$lt scripts/train_fashion_mlp.lua --epochs 1 --threads 1 --data $data"
  "cnn recipe, 6400 images|$lt scripts/train_fashion_cnn.lua --epochs 1 --limit 6400 --threads 1 --data $data"
  "REPL session|$lt -i /dev/null < scripts/bench/repl_session.lua"
)
seconds() { # runs a command line, prints its wall time in seconds
  local start end
  start=$(date +%s.%N)
  bash -c "$1" >/dev/null 2>&1
  end=$(date +%s.%N)
  awk -v s="$start" -v e="$end" 'BEGIN { printf "%.3f\n", e - s }'
}
median() { sort -g | awk '{ v[NR] = $1 } END { print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }
printf '%-26s %9s %9s %8s\n' case "off s" "on s" cost
for c in "${cases[@]}"; do
  name=${c%%|*} cmd=${c#*|}
  off=() on=()
  for ((r = 0; r < repeats; r++)); do
    off+=("$(seconds "LT_PEAK_COLLECT=0 $cmd")")
    on+=("$(seconds "LT_PEAK_COLLECT=1 $cmd")")
  done
  o=$(printf '%s\n' "${off[@]}" | median) n=$(printf '%s\n' "${on[@]}" | median)
  awk -v c="$name" -v o="$o" -v n="$n" 'BEGIN { printf "%-26s %9.3f %9.3f %+7.1f%%\n", c, o, n, 100 * (n - o) / o }'
done
