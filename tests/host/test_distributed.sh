#!/usr/bin/env bash
# lt.distributed over Open MPI (tests/host/distributed/check.lua): every
# collective for every dtype and op against a serial computation, async work,
# the errors, destroy and init again, and a timeout, under mpirun -np 2 and
# -np 3; a rank that raises an error ends the job with its error shown on
# every rank, and a rank that is killed ends it too, both long before the
# timeout; without mpirun, init_process_group is MPI's singleton (a world of
# one) and lt -e never loads lt.distributed.
# Exits 77 (a skip, with the reason) when mpirun or MPI is missing.
# Usage: bash tests/host/test_distributed.sh path/to/lt [build-dir]
set -u

LT=${1:?usage: test_distributed.sh path/to/lt [build-dir]}
LT=$(cd "$(dirname "$LT")" && pwd)/$(basename "$LT")
CHECK=tests/host/distributed/check.lua
source "$(dirname "$0")/mpi_checks.sh" # check, run, mpi, report

run "$LT" -e 'print(package.loaded["lt.distributed"] == nil, lt.distributed.is_initialized())'
check "lt -e does not load lt.distributed until it is used" '[[ $status == 0 && $out == "true	false" ]]'

if ! "$LT" -e 'os.exit(lt.distributed.is_mpi_available() and 0 or 1)'; then
  run "$LT" -e 'lt.distributed.init_process_group({backend = "mpi"})'
  check "without MPI, init_process_group says why" '[[ $status != 0 && $out == *"this lt was built without MPI"* ]]'
  echo "skip - this lt was built without MPI: no multi-rank test"
  exit 77
fi
if ! command -v mpirun >/dev/null; then
  echo "skip - mpirun is not installed (Debian: openmpi-bin): no multi-rank test"
  exit 77
fi

run "$LT" "$CHECK" singleton
check "without mpirun: a world of one" '[[ $status == 0 && $out == *"ok singleton rank 0"* ]]'

for np in 2 3; do
  mpi "$np" "$CHECK" collectives
  all=1
  for ((r = 0; r < np; r++)); do grep -q "^ok collectives rank $r " <<<"$out" || all=0; done
  check "every collective, dtype and op on $np ranks" '[[ $status == 0 && $all == 1 ]]'
done

# Rank 1 raises an error between two collectives (timeout 30 s): it prints its
# error and the others, waiting in the next collective, print theirs naming it.
mpi 3 "$CHECK" fail
check "an error on rank 1 ends the job at once, shown on every rank" \
  '[[ $status != 0 && $status != 124 && $seconds -lt 20 && $out == *"check.lua:"*": boom on rank 1"* &&
     $out == *"all_reduce: rank 0 stopped because rank 1 failed: tests/host/distributed/check.lua:"*": boom on rank 1"* &&
     $out == *"all_reduce: rank 2 stopped because rank 1 failed"* && $out != *"was not stopped"* ]]'

# Rank 1 is killed (SIGKILL) before a collective: mpirun ends the others.
mpi 2 "$CHECK" die
check "a killed rank ends the job at once" \
  '[[ $status != 0 && $status != 124 && $seconds -lt 20 && $out == *"exited on signal 9"* && $out != *"was not stopped"* ]]'

report test_distributed
