#!/usr/bin/env bash
# DistributedDataParallel's step on 1 and 2 ranks (one thread each) for the
# MLP (7 MiB of gradients: communication-heavy) and the Fashion CNN (compute-
# heavy), and how much of the communication the bucketing hides; see
# scripts/bench/ddp_step.lua for the columns. Times on a shared machine are
# noise: compare the columns of one line.
#   bash scripts/bench/ddp_bench.sh [path/to/lt] [steps]
set -eu
LT=${1:-build/lt}
STEPS=${2:-20}
for model in mlp cnn; do
  OMP_NUM_THREADS=1 "$LT" scripts/bench/ddp_step.lua "$model" 64 "$STEPS"
  mpirun --oversubscribe --allow-run-as-root -np 2 -x OMP_NUM_THREADS=1 \
    "$LT" scripts/bench/ddp_step.lua "$model" 64 "$STEPS"
done
