#!/usr/bin/env bash
# The whole test suite: builds lt (Release), runs every test through ctest, then
# builds again with AddressSanitizer + UndefinedBehaviorSanitizer and runs the
# suite once more. Ends with ctest's summary line.
#   scripts/test.sh            (LT_SKIP_SANITIZE=1 skips the sanitizer pass)
set -euo pipefail
cd "$(dirname "$0")/.."
jobs=$(nproc)
export LT_SETUP_TESTS=1 # the tests' own packages too (scripts/setup.sh)

bash scripts/setup.sh build
if [ "${LT_SKIP_SANITIZE:-0}" != 1 ]; then
  # CUDA code is compiled and linked by the Release build above; the sanitizer
  # pass checks the C code that runs here.
  bash scripts/setup.sh build-sanitize -DLT_SANITIZE=ON -DLT_CUDA=OFF -DCMAKE_BUILD_TYPE=RelWithDebInfo
  echo "== sanitizer build (ASan + UBSan) =="
  # OpenBLAS and libgomp keep thread pools alive at exit: not our leaks.
  ASAN_OPTIONS=detect_leaks=1:abort_on_error=0 \
  LSAN_OPTIONS=suppressions=$PWD/tests/lsan.supp:print_suppressions=0 \
  UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
    ctest --test-dir build-sanitize --output-on-failure -j"$jobs" \
    -E 'host/test_rockspec' # a build of its own, not of this one: the release pass runs it
fi
echo "== release build =="
ctest --test-dir build --output-on-failure -j"$jobs"
