# What the multi-rank host tests share (sourced by tests/host/test_distributed.sh,
# tests/host/test_ddp.sh and tests/simdev/test_nccl.sh): counted checks that show the
# output of a failure, commands bounded in time, and lt under mpirun on this machine.
# Set LT (the lt binary) before sourcing; RUN_TIMEOUT (seconds) bounds each command.

# Under the sanitizers (ignored otherwise): Open MPI's leaks at exit are
# suppressed by module (tests/lsan.supp), which needs whole stacks; the fast
# unwinder stops at the components MPI_Finalize has already unloaded.
export ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}fast_unwind_on_malloc=0"

RUN_TIMEOUT=${RUN_TIMEOUT:-120}
passed=0
failed=0
out=""
status=0
seconds=0

# check NAME EXPR: EXPR (bash, over $out, $status, $seconds) must hold.
check() {
  if eval "$2"; then
    passed=$((passed + 1))
    echo "ok   - $1 ($seconds s)"
  else
    failed=$((failed + 1))
    echo "FAIL - $1"
    echo "       expected: $2"
    echo "       status: $status, $seconds s"
    echo "       output: ${out//$'\n'/$'\n'               }"
  fi
}

# run CMD...: bounded in time (status 124: a hang), output and seconds kept.
run() {
  local start=$SECONDS
  out=$(timeout "$RUN_TIMEOUT" "$@" 2>&1 </dev/null)
  status=$?
  seconds=$((SECONDS - start))
}

# mpi NP ARGS...: lt under mpirun on this machine, one thread per rank; the
# variables named in MPI_PASS (space-separated) go to every rank.
mpi() {
  local np=$1 pass=() v
  shift
  for v in ${MPI_PASS:-}; do pass+=(-x "$v"); done
  run mpirun --oversubscribe --allow-run-as-root -np "$np" -x OMP_NUM_THREADS=1 "${pass[@]}" "$LT" "$@"
}

# The last line of a test: its counts, and its status.
report() {
  echo "$1: $passed passed, $failed failed"
  [[ $failed == 0 ]]
}
