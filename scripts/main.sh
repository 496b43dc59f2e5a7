#!/usr/bin/env bash
# The main job: build lt and train the Fashion-MNIST CNN recipe (its last line
# is "test accuracy 0.XXXX"). Extra arguments go to the recipe (--help lists them).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh build
exec build/lt scripts/train_fashion_cnn.lua "$@"
