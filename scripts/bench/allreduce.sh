#!/usr/bin/env bash
# lt.distributed.all_reduce against MPI_Allreduce called from C, in the same
# run, 2 ranks on this machine: float32 sums of 1, 16 and 64 MiB in place,
# median of REPEATS, three rounds (scripts/bench/allreduce_mpi.c, scripts/bench/allreduce.lua).
# lt's synchronous call is a description exchange (a few bytes, with the
# deadline) and then the same blocking MPI_Allreduce; async_op=true uses
# MPI_Iallreduce, whose C time is the "nonblocking" column.
#   scripts/bench/allreduce.sh [REPEATS]
set -euo pipefail
cd "$(dirname "$0")/../.."
lt=${LT:-build/lt}
[ -x "$lt" ] || bash scripts/setup.sh build >/dev/null
repeats=${1:-10}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
mpicc -O2 -o "$tmp/allreduce_mpi" scripts/bench/allreduce_mpi.c
mpi() { mpirun --oversubscribe --allow-run-as-root -np 2 -x OMP_NUM_THREADS=1 "$@"; }
# Three rounds, the programs alternating, so that a shared machine's load
# falls on both sides; each figure is the median of its rounds' medians.
for round in 1 2 3; do
  mpi "$tmp/allreduce_mpi" "$repeats"
  mpi "$lt" scripts/bench/allreduce.lua "$repeats"
  mpi "$tmp/allreduce_mpi" "$repeats" nonblocking
done >"$tmp/times"
sort -k1,1 -k2,2n -k3,3g "$tmp/times" | awk '
  { key = $1 " " $2; n[key]++; v[key, n[key]] = $3 }
  END {
    for (key in n) ms[key] = v[key, int((n[key] + 1) / 2)]
    printf "%-8s %14s %10s %10s %20s %14s %10s\n", "MiB", "MPI_Allreduce", "lt", "lt/MPI", "MPI_Iallreduce+Test", "lt async", "ratio"
    split("1 16 64", sizes, " ")
    for (i = 1; i <= 3; i++) {
      s = sizes[i]
      printf "%-8s %11.3f ms %7.3f ms %10.2f %17.3f ms %11.3f ms %10.2f\n", s, ms["mpi " s], ms["lt " s],
        ms["lt " s] / ms["mpi " s], ms["mpi_nonblocking " s], ms["lt_async " s], ms["lt_async " s] / ms["mpi_nonblocking " s]
    }
  }'
