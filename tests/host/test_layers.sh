#!/usr/bin/env bash
# The engine's directories are layers (docs/ARCHITECTURE.md): core/ (tensor, storage,
# dtype, device, errors, threads) sits below everything but the allocator, so its
# objects call nothing of ops/, autograd/, cpu/, cuda/, io/ or dist/, and its sources include
# none of their headers. lt/cuda.h has one implementation, core/cuda_hooks.c, whose
# hooks a CUDA build, the emulator and the simulated device install; and one table of
# kernels per device type is registered, in one place (ops/backend_select.c).
# Usage: bash tests/host/test_layers.sh path/to/lt build-dir
set -u
BUILD=${2:?usage: test_layers.sh path/to/lt build-dir}
BUILD=$(cd "$BUILD" && pwd)
cd "$(dirname "$0")/../.."
failed=0
ok() { echo "ok   - $1"; }
fail() { echo "FAIL - $1"; failed=$((failed + 1)); }

# The engine archive's members (CMake writes it anew at each build, so no stale object
# of a moved file is in it): core's are those named after engine/core/*.c.
archive=$BUILD/liblt_engine.a
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
if ! (cd "$tmp" && ar x "$archive" 2>/dev/null); then
  fail "the engine archive $archive"
else
  core=() alloc=()
  for f in engine/core/*.c; do core+=("$tmp/$(basename "$f").o"); done
  for f in engine/alloc/*.c; do alloc+=("$tmp/$(basename "$f").o"); done
  # Engine symbols core's objects use that neither core nor the allocator defines. In a
  # CUDA build core's hooks start as the runtime's (lt_cuda_runtime_hooks): a table of
  # function pointers handed down, not a call into the layer.
  used=$(for o in "${core[@]}"; do nm -u "$o"; done | awk '{ print $2 }' |
         grep -E '^(lt_|ag_|cpu_|cuda_|ops_)' | grep -vx lt_cuda_runtime_hooks | sort -u)
  defined=$(nm --defined-only "${core[@]}" "${alloc[@]}" | awk 'NF == 3 { print $3 }' | sort -u)
  above=$(comm -23 <(echo "$used") <(echo "$defined") | tr '\n' ' ')
  if [[ -z ${above// /} ]]; then ok "core's objects call only core and the allocator (${#core[@]} objects)"
  else fail "core's objects call layers above them: $above"; fi
fi

includes=$(grep -HnE '#include "(autograd|ops|cpu|cuda|io|dist)/|#include "lt/(ops|autograd|rng|print|index|nn|optim|io|distributed)\.h"' \
           engine/core/*.c engine/core/*.h | grep -vE 'core/(backend|nn_backend|optim_backend|device_kernels)\.h:')
if [[ -z $includes ]]; then ok "core's sources include no header of a layer above"
else fail "core's sources include headers of layers above: $includes"; fi

impls=$(grep -rlE '^(extern "C" )?(static )?int lt_cuda_device_count\(void\) \{' engine tests | sort | tr '\n' ' ')
[[ $impls == "engine/core/cuda_hooks.c " ]] && ok "lt/cuda.h has one implementation (core/cuda_hooks.c)" ||
  fail "lt/cuda.h is implemented in: $impls"

regs=$(grep -rlE 'registered\[' engine --include=*.c --include=*.cu | sort | tr '\n' ' ')
[[ $regs == "engine/ops/backend_select.c " ]] && ok "one registry of kernel tables (ops/backend_select.c)" ||
  fail "kernel-table registries in: $regs"

echo "test_layers: $failed failed"
[[ $failed == 0 ]]
