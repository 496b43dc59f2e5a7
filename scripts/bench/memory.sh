#!/usr/bin/env bash
# Peak-memory benchmark: the peak bytes of a training step in lt (exact
# allocator counts of the tensors' own bytes, scripts/bench/memory_step.lua,
# and of the allocator's blocks beside them) against PyTorch from
# PyPI (its profiler's memory timeline, scripts/bench/memory_torch.py), for the
# benchmark's MLP and CNN and a transformer block, at batch 128 and 1, in
# float32 and with the forward under bfloat16 autocast (PyTorch's
# torch.autocast("cpu")). Prints lt/PyTorch ratios (lower is better). PyTorch comes from a virtual
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
printf '%-6s %5s %-9s %14s %12s %8s %12s %14s\n   (torch %s)\n' model batch precision "lt tensor MiB" \
  "torch MiB" ratio "lt-torch B" "lt blocks MiB" "$("$venv/bin/python" -c 'import torch; print(torch.__version__)')"
for precision in float32 bf16; do
  amp=$([ "$precision" = bf16 ] && echo bf16 || true)
  for model in mlp cnn block; do
    for batch in 128 1; do
      read -r _ _ lt_mib lt_blocks lt_bytes < <("$lt" scripts/bench/memory_step.lua "$model" "$batch" $amp)
      read -r _ _ pt_mib pt_bytes < <("$venv/bin/python" scripts/bench/memory_torch.py "$model" "$batch" $amp \
        2>/dev/null)
      awk -v m="$model" -v b="$batch" -v c="$precision" -v a="$lt_mib" -v p="$pt_mib" -v k="$lt_blocks" \
        -v d="$((lt_bytes - pt_bytes))" \
        'BEGIN { printf "%-6s %5d %-9s %14.3f %12.3f %8.4f %12d %14.3f\n", m, b, c, a, p, a / p, d, k }'
    done
  done
done
