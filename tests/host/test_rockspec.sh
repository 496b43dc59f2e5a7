#!/usr/bin/env bash
# luarocks make with lt-scm-1.rockspec, in a copy of the checkout (luarocks builds in the
# source directory) into a temporary rocks tree, CUDA off to keep it short: plain lua5.4
# then requires "lt" from the tree, and the tree's bin/lt runs on the tree's library.
# Usage: bash tests/host/test_rockspec.sh path/to/lt [build-dir]
set -u
cd "$(dirname "$0")/../.."
if ! command -v luarocks >/dev/null || ! command -v lua5.4 >/dev/null; then
  echo "FAIL - luarocks and lua5.4 are needed (scripts/setup.sh installs them for the tests)"
  exit 1
fi
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
mkdir "$TMP/src"
git ls-files -z --cached --others --exclude-standard | xargs -0 cp --parents -t "$TMP/src" 2>/dev/null
sed 's/    CMAKE_BUILD_TYPE = "Release",/&\n    LT_CUDA = "OFF",/' lt-scm-1.rockspec >"$TMP/src/lt-scm-1.rockspec"
if ! (cd "$TMP/src" && luarocks --lua-version 5.4 make --tree "$TMP/tree" lt-scm-1.rockspec) \
     >"$TMP/make.log" 2>&1; then
  echo "FAIL - luarocks make"; tail -n 30 "$TMP/make.log"; exit 1
fi
echo "ok   - luarocks make built and installed lt"
rm -rf "$TMP/src" # the tree must not need the sources
failed=0
eval "$(luarocks --lua-version 5.4 --tree "$TMP/tree" path)"
out=$(cd / && lua5.4 -e 'local lt = require "lt"; print(lt.ones(2, 3):sum():item())' 2>&1)
if [[ $out == 6.0 ]]; then echo "ok   - lua5.4 requires lt from the rocks tree"
else echo "FAIL - lua5.4 requires lt from the rocks tree: $out"; failed=1; fi
out=$(cd / && "$TMP/tree/bin/lt" -e 'print(package.searchpath("lt", package.path))' 2>&1)
if [[ $out == "$TMP/tree/bin/../share/lua/5.4/lt/init.lua" ]]; then echo "ok   - the tree's bin/lt runs on the tree's library"
else echo "FAIL - the tree's bin/lt runs on the tree's library: $out"; failed=1; fi
[[ $failed == 0 ]]
