#!/usr/bin/env bash
# Op-by-op timings at the GPT's shapes (GELU 16x64x512 in both forms, with its backward,
# scale + masked_fill + softmax 16x4x64x64, softmax with its backward, cross-entropy
# 1024x76 and layer norm 16x64x128 with and without their backward, clip_grad_norm_ over
# the GPT's 29 parameter tensors, exp, tanh), lt against PyTorch from PyPI, 1 thread:
# each process reports its best of REPEATS calls; the two alternate ROUNDS times and the
# table shows the medians and the ratio (lower is better). PyTorch comes from .venv-torch,
# made here when missing (pip install torch: a few GB, minutes).
#   scripts/bench/ops.sh [ROUNDS] [REPEATS]      (OPS="gelu exp" for some rows only)
set -euo pipefail
cd "$(dirname "$0")/../.."
lt=${LT:-build/lt}
[ -x "$lt" ] || bash scripts/setup.sh build >/dev/null
rounds=${1:-5} repeats=${2:-20}
venv=.venv-torch
if [ ! -x "$venv/bin/python" ] || ! "$venv/bin/python" -c 'import torch' 2>/dev/null; then
  echo "ops.sh: making $venv with PyTorch from PyPI (once; a few GB)" >&2
  python3 -m venv "$venv"
  "$venv/bin/pip" install -q torch safetensors
fi
median() { sort -g | awk '{ v[NR] = $1 } END { print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }
printf '%-22s %10s %10s %8s   (torch %s)\n' op "lt ms" "torch ms" ratio \
  "$("$venv/bin/python" -c 'import torch; print(torch.__version__)')"
ops=${OPS:-gelu gelu_fwd_bwd gelu_tanh masked_softmax softmax_fwd_bwd cross_entropy cross_entropy_fwd_bwd
  layer_norm layer_norm_fwd_bwd clip_grad_norm exp tanh}
for op in $ops; do
  a=() b=()
  for ((r = 0; r < rounds; r++)); do
    a+=("$("$lt" scripts/bench/ops.lua "$op" "$repeats" | awk '{ print $2 }')")
    b+=("$("$venv/bin/python" scripts/bench/ops_torch.py "$op" "$repeats" | awk '{ print $2 }')")
  done
  l=$(printf '%s\n' "${a[@]}" | median) t=$(printf '%s\n' "${b[@]}" | median)
  awk -v o="$op" -v l="$l" -v t="$t" 'BEGIN { printf "%-22s %10.3f %10.3f %8.2f\n", o, l, t, l / t }'
done
