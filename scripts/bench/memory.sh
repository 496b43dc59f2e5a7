#!/usr/bin/env bash
# Peak-memory benchmark: the peak bytes of a training step in lt (exact
# allocator counts of the tensors' own bytes, scripts/bench/memory_step.lua,
# and of the allocator's blocks beside them) against PyTorch from
# PyPI (its profiler's memory timeline, scripts/bench/memory_torch.py), for the
# benchmark's MLP and CNN and a transformer block, at batch 128 and 1. Prints
# lt/PyTorch ratios (lower is better). PyTorch comes from a virtual
# environment, .venv-torch, made here when missing (pip install torch: a few
# GB, minutes).
#   scripts/bench/memory.sh
set -euo pipefail
cd "$(dirname "$0")/../.."
lt=${LT:-build/lt}
[ -x "$lt" ] || bash scripts/setup.sh build >/dev/null
venv=.venv-torch
if [ ! -x "$venv/bin/python" ] || ! "$venv/bin/python" -c 'import torch' 2>/dev/null; then
  echo "memory.sh: making $venv with PyTorch from PyPI (once; a few GB)" >&2
  python3 -m venv "$venv"
  "$venv/bin/pip" install -q torch safetensors
fi
printf '%-6s %5s %14s %12s %8s %14s\n   (torch %s)\n' model batch "lt tensor MiB" "torch MiB" ratio "lt blocks MiB" \
  "$("$venv/bin/python" -c 'import torch; print(torch.__version__)')"
for model in mlp cnn block; do
  for batch in 128 1; do
    read -r _ _ lt_mib lt_blocks < <("$lt" scripts/bench/memory_step.lua "$model" "$batch")
    read -r _ _ pt_mib < <("$venv/bin/python" scripts/bench/memory_torch.py "$model" "$batch" 2>/dev/null)
    awk -v m="$model" -v b="$batch" -v a="$lt_mib" -v p="$pt_mib" -v k="$lt_blocks" \
      'BEGIN { printf "%-6s %5d %14.3f %12.3f %8.4f %14.3f\n", m, b, a, p, a / p, k }'
  done
done
