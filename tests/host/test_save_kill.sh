#!/usr/bin/env bash
# lt.save under `kill -9`: child lt processes saving a 64 MiB file are killed
# while they hold the new file open (the kill lands mid-save), many times. The
# file must always load as the old or the new complete contents, and no
# temporary may remain once another save of it has run (with O_TMPFILE none
# is ever left; with the named fallback the next save removes it).
# Usage: bash tests/host/test_save_kill.sh path/to/lt [build-dir]
set -u

LT=${1:?usage: test_save_kill.sh path/to/lt [build-dir]}
if [[ ! -x $LT ]]; then
  echo "test_save_kill: no lt executable at '$LT'" >&2
  exit 1
fi
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
F=$TMP/F.safetensors

passed=0
failed=0
check() {
  if eval "$2"; then
    passed=$((passed + 1))
    echo "ok   - $1"
  else
    failed=$((failed + 1))
    echo "FAIL - $1"
    echo "       expected: $2"
    [[ -n ${3:-} ]] && echo "       note: $3"
  fi
}

cat >"$TMP/write.lua" <<'EOF'
local lt = require "lt"
local t = {}
for i = 1, 8 do t["w" .. i] = lt.full({ 2 ^ 21 }, tonumber(arg[2])) end -- 8 MiB each
lt.save(arg[1], t)
EOF
# Prints the one value every element of every tensor holds, or what is wrong.
cat >"$TMP/check.lua" <<'EOF'
local lt = require "lt"
local ok, tensors = pcall(lt.load, arg[1])
if not ok then print("unreadable: " .. tostring(tensors)) return end
local value, n = nil, 0
for _, t in pairs(tensors) do
  n = n + 1
  if t:numel() ~= 2 ^ 21 then print("short tensor") return end
  local lo, hi = t:min():item(), t:max():item()
  if lo ~= hi or (value and value ~= lo) then print("mixed") return end
  value = lo
end
print(n == 8 and string.format("%d", value) or ("tensors: " .. n))
EOF

temporaries() { find "$TMP" -maxdepth 1 -name 'F.safetensors.tmp.*' | wc -l; }

"$LT" "$TMP/write.lua" "$F" 1
check "the first save writes the file" '[[ $("$LT" "$TMP/check.lua" "$F") == 1 ]]'

landed=0
completed=0
bad=""
tries=0
start=$SECONDS
while ((landed < 8 && tries < 80 && SECONDS - start < 120)); do
  tries=$((tries + 1))
  "$LT" "$TMP/write.lua" "$F" 2 &
  pid=$!
  # Wait until the child has its new file open in the directory, then kill
  # it at once or a little later (the later kills can land in the rename).
  for _ in $(seq 1 3000); do
    if ls -l "/proc/$pid/fd" 2>/dev/null | grep -q "$TMP/"; then break; fi
    kill -0 "$pid" 2>/dev/null || break
    sleep 0.002
  done
  ((tries % 3 == 0)) && sleep 0.0$((RANDOM % 5))
  kill -9 "$pid" 2>/dev/null
  wait "$pid" 2>/dev/null
  v=$("$LT" "$TMP/check.lua" "$F")
  case $v in
    1) landed=$((landed + 1)) ;;
    2) completed=$((completed + 1)); "$LT" "$TMP/write.lua" "$F" 1 ;;
    *) bad="$bad [try $tries: $v]" ;;
  esac
done
echo "       $tries kills: $landed mid-save, $completed after the save completed"
check "the file is always the old or the new complete file" '[[ -z $bad ]]' "$bad"
check "kills landed mid-save (at least 8, in $tries tries)" '((landed >= 8))'
left=$(temporaries)
"$LT" "$TMP/write.lua" "$F" 3
check "no temporary remains after the next save (there were $left)" '[[ $(temporaries) == 0 ]]'
check "the next save writes the new file" '[[ $("$LT" "$TMP/check.lua" "$F") == 3 ]]'

echo "test_save_kill: $passed passed, $failed failed"
((failed == 0))
