#!/usr/bin/env bash
# Both Fashion recipes, a few steps each, on the CPU and under --device cuda
# on the simulated slot (the CPU's kernels): the device path (data prefetch
# to the device, the model and optimizer there) must give the CPU's test
# accuracy exactly.
#   tests/simdev/recipes.sh path/to/lt_simdev
set -euo pipefail
lt=$1
status=0
for spec in "train_fashion_mlp --epochs 1 --limit 3200" "train_fashion_cnn --epochs 1 --limit 640"; do
  set -- $spec
  recipe=$1
  shift
  cpu=$("$lt" --device cpu "scripts/$recipe.lua" "$@" | tail -n 1)
  cuda=$("$lt" --device cuda "scripts/$recipe.lua" "$@" | tail -n 1)
  echo "$recipe: cpu '$cpu', cuda '$cuda'"
  case $cpu in "test accuracy "*) ;; *) echo "FAIL: $recipe gave no accuracy on the CPU"; status=1 ;; esac
  [ "$cpu" = "$cuda" ] || { echo "FAIL: $recipe differs under --device cuda"; status=1; }
done
exit $status
