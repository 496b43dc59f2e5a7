#!/usr/bin/env bash
# Builds and runs blas_choice.c at 1 and 2 threads (needs libopenblas-dev and libdnnl-dev).
set -euo pipefail
cd "$(dirname "$0")"
gcc -O2 -I/usr/include/x86_64-linux-gnu/openblas-pthread blas_choice.c -lopenblas -ldnnl -o /tmp/blas_choice
for t in 1 2; do
  echo "== $t thread(s) =="
  OMP_NUM_THREADS=$t OPENBLAS_NUM_THREADS=$t /tmp/blas_choice
done
