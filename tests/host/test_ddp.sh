#!/usr/bin/env bash
# Data-parallel training over MPI ranks (tests/host/ddp/check.lua, alone and
# under mpirun -np 2 and -np 3): DistributedDataParallel for K steps equals one
# process on the full batch, and so does no_sync accumulation; the
# distributed DataLoader covers each epoch once across the ranks, in the
# single-process order interleaved; ZeroRedundancyOptimizer holds 1/N of
# Adam's state and its parameters equal plain Adam's; a model whose shapes
# differ is refused on every rank with the parameter named; a parameter one
# rank does not use is handled by find_unused_parameters and, without it,
# named by an error on every rank. Then the CNN
# recipe with --ddp and --zero, resumed from its checkpoint: the same
# accuracy as the uninterrupted run.
# Exits 77 (a skip, with the reason) when mpirun or lt.distributed is missing.
# Usage: bash tests/host/test_ddp.sh path/to/lt [build-dir]
set -u

LT=${1:?usage: test_ddp.sh path/to/lt [build-dir]}
LT=$(cd "$(dirname "$LT")" && pwd)/$(basename "$LT")
if ! command -v mpirun >/dev/null; then
  echo "skip - mpirun is not installed (Debian: openmpi-bin): no multi-rank test"
  exit 77
fi
if ! "$LT" -e 'assert(require("lt").distributed.init_process_group)' >/dev/null 2>&1; then
  echo "skip - this lt has no lt.distributed (built without MPI)"
  exit 77
fi
RUN_TIMEOUT=60
source "$(dirname "$0")/mpi_checks.sh" # check, run, mpi, report
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT

# "ok MODE rank R" from each of the np ranks.
all_ranks_ok() {
  local mode=$1 np=$2 r
  for ((r = 0; r < np; r++)); do
    grep -q "^ok $mode rank $r\$" <<<"$out" || return 1
  done
}

# Without mpirun: a world of one, through lt.distributed's own group.
for mode in ddp zero; do
  run "$LT" tests/host/ddp/check.lua "$mode"
  check "$mode on 1 rank (no mpirun)" '[[ $status -eq 0 ]] && all_ranks_ok '"$mode 1"
done

for np in 2 3; do
  for mode in ddp no_sync loader zero mismatch unused; do
    mpi "$np" tests/host/ddp/check.lua "$mode"
    check "$mode on $np ranks" '[[ $status -eq 0 ]] && all_ranks_ok '"$mode $np"
  done
done

# The recipe, 2 ranks: 2 epochs at once, and 1 epoch then a resume.
DATA=/usr/share/datasets/fashion-mnist
if [[ -r $DATA/train-images-idx3-ubyte.gz || -r $DATA/train-images-idx3-ubyte ]]; then
  for flag in --ddp --zero; do
    recipe=(scripts/train_fashion_cnn.lua "$flag" --limit 256 --batch_size 32 --threads 1)
    mpi 2 "${recipe[@]}" --epochs 2
    whole=$(grep '^test accuracy' <<<"$out")
    check "recipe $flag: rank 0 alone prints the result" \
      '[[ $status -eq 0 && $(grep -c "^test accuracy" <<<"$out") -eq 1 ]]'
    mpi 2 "${recipe[@]}" --epochs 1 --checkpoint "$TMP/ck.safetensors"
    mpi 2 "${recipe[@]}" --epochs 2 --checkpoint "$TMP/ck.safetensors" --resume
    check "recipe $flag: resumed run ends as the uninterrupted one ($whole)" \
      '[[ $status -eq 0 && -n "$whole" && "$(grep "^test accuracy" <<<"$out")" == "$whole" ]]'
    rm -f "$TMP/ck.safetensors"
  done
else
  echo "skip - the recipe runs (no Fashion-MNIST under $DATA)"
fi

report test_ddp
