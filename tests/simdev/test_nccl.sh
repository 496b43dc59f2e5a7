#!/usr/bin/env bash
# lt.distributed's nccl backend without a GPU: lt_simdev with the NCCL
# stand-in over MPI (tests/simdev/sim_nccl.c), or lt_cudaemu, where lt's own
# NCCL code (engine/cuda/cuda_nccl.cu) opens an emulated libnccl over that
# stand-in; one process per device, as NCCL is used. Every collective, dtype and op on CUDA
# tensors against a serial computation (tests/host/distributed/check.lua
# with backend nccl) on 2 ranks and in a world of one; DDP over cuda:0 and
# cuda:1 equal to one process on the full batch; the failures: collectives
# that differ between ranks and the timeout (in check.lua), a rank's error
# ending the job, NCCL's asynchronous error ending a wait, and two ranks on one
# device refused. In a build without
# MPI, the world of one only (the stand-in of sim_nccl_one.c).
# Exits 77 (a skip, with the reason) without mpirun or MPI (after the world
# of one) or without the stand-in.
# Usage: bash tests/simdev/test_nccl.sh path/to/lt_simdev|lt_cudaemu
set -u

LT=${1:?usage: test_nccl.sh path/to/lt_simdev|lt_cudaemu}
LT=$(cd "$(dirname "$LT")" && pwd)/$(basename "$LT")
CHECK=tests/host/distributed/check.lua
DDP=tests/host/distributed/ddp_cuda.lua
# Two devices in either host, unless a check asks for fewer.
export LT_SIM_CUDA_DEVICES=2 LT_EMU_CUDA_DEVICES=2

if ! "$LT" -e 'os.exit(lt.distributed.is_nccl_available() and lt.cuda.is_available() and 0 or 1)'; then
  echo "skip - $(basename "$LT") has no NCCL stand-in or no CUDA device"
  exit 77
fi

RUN_TIMEOUT=60 MPI_PASS="LT_SIM_CUDA_DEVICES LT_EMU_CUDA_DEVICES"
source "$(dirname "$0")/../host/mpi_checks.sh" # check, run, mpi, report

# Every rank printed "ok WHAT rank R".
all_ok() {
  local what=$1 np=$2
  for ((r = 0; r < np; r++)); do grep -q "^ok $what rank $r" <<<"$out" || return 1; done
}

# Without mpirun: a world of one (MPI's singleton; without MPI, mpi_none.c,
# as on a GPU machine without Open MPI).
run "$LT" "$CHECK" collectives nccl
check "a world of one (no mpirun) through nccl" '[[ $status == 0 ]] && all_ok collectives 1'
run "$LT" "$DDP"
check "DDP in a world of one through nccl" '[[ $status == 0 ]] && all_ok ddp_cuda 1'

if ! "$LT" -e 'os.exit(lt.distributed.is_mpi_available() and 0 or 1)'; then
  OMPI_COMM_WORLD_SIZE=2 run "$LT" -e 'lt.distributed.init_process_group({backend = "nccl"})'
  check "without MPI, a launcher's world of two is refused" \
    '[[ $status != 0 && $out == *"can start only a world of one, and the launcher started 2 ranks"* ]]'
  echo "skip - this lt was built without MPI: no multi-rank test ($passed passed, $failed failed)"
  [[ $failed == 0 ]] && exit 77 || exit 1
fi
if ! command -v mpirun >/dev/null; then
  echo "skip - mpirun is not installed (Debian: openmpi-bin): no multi-rank test ($passed passed, $failed failed)"
  [[ $failed == 0 ]] && exit 77 || exit 1
fi

mpi 2 "$CHECK" collectives nccl
check "every collective, dtype and op on cuda:0 and cuda:1 through nccl, and its errors and timeout" \
  '[[ $status == 0 ]] && all_ok collectives 2'

mpi 2 "$DDP"
check "DDP over cuda:0 and cuda:1 equals one process on the full batch" '[[ $status == 0 ]] && all_ok ddp_cuda 2'

mpi 2 "$CHECK" fail nccl
check "an error on rank 1 ends the job at once, shown on rank 0" \
  '[[ $status != 0 && $status != 124 && $seconds -lt 20 && $out == *": boom on rank 1"* &&
     $out == *"all_reduce: rank 0 stopped because rank 1 failed"* && $out != *"was not stopped"* ]]'

LT_SIM_NCCL_ASYNC_ERROR=1 MPI_PASS="$MPI_PASS LT_SIM_NCCL_ASYNC_ERROR" mpi 2 tests/host/distributed/nccl_async_error.lua
# (Rank 0's collective runs inside the stand-in's MPI call, which rank 1 never joins: the
# job's end stops it, where over NCCL it would stop at the notice of rank 1's failure.)
check "NCCL's asynchronous error ends the wait at once with its words, breaks the group, ends the job" \
  '[[ $status != 0 && $status != 124 && $seconds -lt 20 &&
     $out == *"rank 1 wait: "*"all_reduce: NCCL reported an asynchronous error on the communicator: remote process exited or there was a network error"* &&
     $out == *"rank 1 then: "*"the process group is broken"* ]]'

LT_SIM_CUDA_DEVICES=1 LT_EMU_CUDA_DEVICES=1 mpi 2 "$CHECK" collectives nccl
check "two ranks for one device are refused, the reason on every rank" \
  '[[ $status != 0 && $status != 124 && $out == *"rank 1 is rank 1 of its machine, which has 1 CUDA devices"* &&
     $out == *"rank 1 could not start nccl"* ]]'

report test_nccl
