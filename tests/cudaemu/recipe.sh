#!/usr/bin/env bash
# The Fashion MLP recipe for 3200 images on the CPU and under --device cuda on
# the CUDA emulator (lt's own kernels and the reference cuBLAS, on the CPU):
# the whole device path of a recipe (prefetch to the device, model, Adam,
# evaluation) must reach the CPU's test accuracy within 0.002 (6 of the 3200
# test images --limit evaluates: the kernels sum in another order than the
# CPU). The CNN recipe is left out: its evaluation through the reference
# convolution takes minutes here; compare_backends checks its ops.
#   tests/cudaemu/recipe.sh path/to/lt path/to/lt_cudaemu
set -euo pipefail
lt=$1
emu=$2
args="scripts/train_fashion_mlp.lua --epochs 1 --limit 3200"
cpu=$("$lt" --device cpu $args | tail -n 1)
cuda=$("$emu" --device cuda $args | tail -n 1)
echo "train_fashion_mlp: cpu '$cpu', emulated cuda '$cuda'"
case $cpu in "test accuracy "*) ;; *) echo "FAIL: no accuracy on the CPU"; exit 1 ;; esac
case $cuda in "test accuracy "*) ;; *) echo "FAIL: no accuracy under --device cuda"; exit 1 ;; esac
awk -v a="${cpu#test accuracy }" -v b="${cuda#test accuracy }" \
  'BEGIN { d = a - b; if (d < 0) d = -d; if (d > 0.002) { print "FAIL: accuracies differ by " d; exit 1 } }'
