#!/usr/bin/env bash
# Training-step benchmark: lt against PyTorch, side by side in one run, on the
# same machine. Prints lt/PyTorch ratios (lower is better) of the best time per
# step and of the peak resident memory of the process, at 1 and 2 threads, for
# the MLP and the CNN at batch 128, and the MLP at batch 1 and 16 (per-op
# overhead). Needs Debian's python3-torch and a built lt (scripts/setup.sh).
#   scripts/bench/run.sh [STEPS]
set -euo pipefail
cd "$(dirname "$0")/../.."
steps=${1:-20}
lt=build/lt
[ -x "$lt" ] || bash scripts/setup.sh build >/dev/null
py=/usr/bin/python3

printf '%-5s %5s %7s %12s %12s %8s %12s %12s %8s\n' model batch threads \
  "lt ms" "torch ms" ratio "lt RSS MiB" "torch RSS" ratio
run() { # model batch threads
  read -r _ _ _ lt_ms lt_rss _ < <("$lt" scripts/bench/step.lua "$1" "$2" "$3" "$steps")
  read -r _ _ _ pt_ms pt_rss < <("$py" scripts/bench/step_torch.py "$1" "$2" "$3" "$steps")
  awk -v m="$1" -v b="$2" -v t="$3" -v a="$lt_ms" -v p="$pt_ms" -v ar="$lt_rss" -v pr="$pt_rss" \
    'BEGIN { printf "%-5s %5d %7d %12.3f %12.3f %8.2f %12.1f %12.1f %8.2f\n", m, b, t, a, p, a / p, ar, pr, ar / pr }'
}
for model in mlp cnn; do
  for threads in 1 2; do run "$model" 128 "$threads"; done
done
run mlp 1 1
run mlp 16 1
