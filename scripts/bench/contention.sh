#!/usr/bin/env bash
# Training steps under CPU contention: the MLP and CNN step (scripts/bench/step.lua,
# batch 128) at 1 and 2 threads, on an idle machine, with a busy loop that the
# scheduler may move, and with a busy loop pinned to CPU 0. Prints the median
# over REPEATS runs of each run's median step (1 and 2 threads alternate, so
# both see the same noise) and 2 threads / 1 thread: above 1 means the second
# thread made the step slower. OpenMP's spinning waits used to make it 5-10x.
#   scripts/bench/contention.sh [REPEATS] [MLP_STEPS] [CNN_STEPS]
set -euo pipefail
cd "$(dirname "$0")/../.."
repeats=${1:-5}
mlp_steps=${2:-200}
cnn_steps=${3:-12}
lt=build/lt
[ -x "$lt" ] || bash scripts/setup.sh build >/dev/null

busy=""
stop_busy() { [ -n "$busy" ] && kill "$busy" 2>/dev/null; wait "$busy" 2>/dev/null || true; busy=""; }
trap stop_busy EXIT
start_busy() { # none | free | pinned
  stop_busy
  case $1 in
    free) timeout 900 sh -c 'while :; do :; done' & busy=$! ;;
    pinned) timeout 900 taskset -c 0 sh -c 'while :; do :; done' & busy=$! ;;
  esac
  return 0
}

median() { sort -g | awk '{ v[NR] = $1 } END { print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }

printf '%-5s %-12s %10s %10s %8s\n' model load "1 thr ms" "2 thr ms" "2/1"
loads="none free"
command -v taskset >/dev/null && loads="$loads pinned"
for model in mlp cnn; do
  steps=$mlp_steps
  [ "$model" = cnn ] && steps=$cnn_steps
  for load in $loads; do
    start_busy "$load"
    sleep 0.2
    : >"/tmp/lt_contention.1" && : >"/tmp/lt_contention.2"
    for _ in $(seq "$repeats"); do
      for threads in 1 2; do
        LT_BENCH_STAT=median "$lt" scripts/bench/step.lua "$model" 128 "$threads" "$steps" |
          awk '{ print $4 }' >>"/tmp/lt_contention.$threads"
      done
    done
    stop_busy
    one=$(median </tmp/lt_contention.1)
    two=$(median </tmp/lt_contention.2)
    awk -v m="$model" -v l="$load" -v a="$one" -v b="$two" \
      'BEGIN { printf "%-5s %-12s %10.3f %10.3f %8.2f\n", m, l, a, b, b / a }'
  done
done
rm -f /tmp/lt_contention.1 /tmp/lt_contention.2
