#!/usr/bin/env bash
# cmake --install into a temporary prefix: P/bin/lt runs from any directory on the
# installed library (not the source tree's), the installed tree still works when moved
# elsewhere, plain lua5.4 requires "lt" from it, and the manual page is there.
# Usage: bash tests/host/test_install.sh path/to/lt build-dir
set -u
BUILD=${2:?usage: test_install.sh path/to/lt build-dir}
BUILD=$(cd "$BUILD" && pwd)
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
failed=0
check() { # check NAME EXPECTED ACTUAL
  if [[ $2 == "$3" ]]; then echo "ok   - $1"; else echo "FAIL - $1: expected '$2', got '$3'"; failed=$((failed + 1)); fi
}

P=$TMP/prefix
if ! cmake --install "$BUILD" --prefix "$P" >"$TMP/install.log" 2>&1; then
  echo "FAIL - cmake --install"; cat "$TMP/install.log"; exit 1
fi
for f in bin/lt share/lua/5.4/lt/init.lua share/lua/5.4/lt/nn/init.lua lib/lua/5.4/lt/core.so \
         share/man/man1/lt.1; do
  check "installed $f" yes "$([[ -e $P/$f ]] && echo yes || echo no)"
done

# From another directory, with LUA_PATH pointing nowhere useful: the library found is the
# installed one.
where='print(package.searchpath("lt.nn", package.path)); print(lt.ones(2, 3):sum():item())'
out=$(cd "$TMP" && LUA_PATH=";;" "$P/bin/lt" -e "$where" 2>&1)
check "P/bin/lt loads the installed library" "$P/bin/../share/lua/5.4/lt/nn/init.lua
6.0" "$out"

# Relocated: the tree moved as a whole still runs on its own library.
mv "$P" "$TMP/moved"
out=$(cd / && "$TMP/moved/bin/lt" -e "$where" 2>&1)
check "a moved installation loads its own library" "$TMP/moved/bin/../share/lua/5.4/lt/nn/init.lua
6.0" "$out"

# Plain lua5.4 on the installed module. A sanitizer build's core.so needs the sanitizer
# runtimes loaded first, which lua5.4 (not built with them) does not do: preload the ones
# the module links, as ASan asks.
preload=""
for rt in $(ldd "$TMP/moved/lib/lua/5.4/lt/core.so" 2>/dev/null | awk '/lib(a|ub)san/ { print $3 }'); do
  preload=${preload:+$preload:}$rt
done
if command -v lua5.4 >/dev/null; then
  M=$TMP/moved
  out=$(cd / && LD_PRELOAD="$preload" LUA_CPATH="$M/lib/lua/5.4/?.so;;" LUA_PATH="$M/share/lua/5.4/?.lua;$M/share/lua/5.4/?/init.lua;;" \
    lua5.4 -e 'local lt = require "lt"; print(package.searchpath("lt", package.path)); print(lt.randn(4, 4).shape[1])' 2>&1)
  check "lua5.4 requires the installed lt" "$M/share/lua/5.4/lt/init.lua
4" "$out"
fi
check "lt --help" 0 "$("$TMP/moved/bin/lt" --help >/dev/null 2>&1; echo $?)"
echo "test_install: $failed failed"
[[ $failed == 0 ]]
