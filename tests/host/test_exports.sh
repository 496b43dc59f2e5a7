#!/usr/bin/env bash
# What the lt executable exports (nm -D --defined-only): lt's public C API
# (the LT_API declarations of engine/include/lt/), luaopen_lt_core, and what
# no build can hide (the C runtime's symbols, libedit's variables copied into
# the executable, OpenMP's named critical sections); nothing internal.
# Usage: bash tests/host/test_exports.sh path/to/lt [build-dir]
set -u
LT=${1:?usage: test_exports.sh path/to/lt [build-dir]}
cd "$(dirname "$0")/../.."
if ! command -v nm >/dev/null; then
  echo "FAIL - nm is not installed" >&2
  exit 1
fi
symbols=$(nm -D --defined-only "$LT" | awk '{print $3}')
public=$(grep -ho 'LT_API [^(]*(' engine/include/lt/*.h | grep -o 'lt_[a-z0-9_]*($' | tr -d '(' | sort -u)
failed=0
count=0
for s in $symbols; do
  count=$((count + 1))
  case $s in
    luaopen_lt_core | _* | data_start | rl_* | std*@* | .gomp_critical_user_*) continue ;;
    lt_*) grep -qx "$s" <<<"$public" && continue ;;
  esac
  echo "FAIL - exported but not public: $s"
  failed=$((failed + 1))
done
# Internals that used to be exported: the allocator's, autograd's, the bindings'.
for internal in lt_try_alloc_locked ag_grad_target ltb_check_tensor cpu_nn_linear; do
  if grep -qx "$internal" <<<"$symbols"; then
    echo "FAIL - internal symbol exported: $internal"
    failed=$((failed + 1))
  fi
done
if ! grep -qx lt_tensor_release <<<"$symbols"; then
  echo "FAIL - the public lt_tensor_release is not exported"
  failed=$((failed + 1))
fi
echo "$count exported symbols, $failed not allowed"
[[ $failed == 0 ]]
