#!/usr/bin/env bash
# The lt host's command line: the options it shares with `lua` (so `busted --lua=lt` works)
# and its own (--threads, --device, --memory-report).
# Usage: bash tests/host/test_cli.sh path/to/lt [build-dir]
set -u

LT=${1:?usage: test_cli.sh path/to/lt [build-dir]}
if [[ ! -x $LT ]]; then
  echo "test_cli: no lt executable at '$LT'" >&2
  exit 1
fi
LT=$(cd "$(dirname "$LT")" && pwd)/$(basename "$LT")
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT

passed=0
failed=0
out=""
err=""
status=0

# run CMD...: stdout to $out, stderr to $err, exit status to $status (stdin from /dev/null).
run() {
  out=$("$@" 2>"$TMP/stderr" </dev/null)
  status=$?
  err=$(cat "$TMP/stderr")
}

# check NAME CONDITION [HINT]: CONDITION is a bash expression over $out, $err, $status.
check() {
  if eval "$2"; then
    passed=$((passed + 1))
    echo "ok   - $1"
  else
    failed=$((failed + 1))
    echo "FAIL - $1"
    echo "       expected: $2"
    [[ -n ${3:-} ]] && echo "       note: $3"
    echo "       status: $status"
    echo "       stdout: ${out//$'\n'/$'\n'               }"
    echo "       stderr: ${err//$'\n'/$'\n'               }"
  fi
}

# ---- the options lua has ----
run "$LT" -e 'print(1 + 2)'
check "-e runs a statement" '[[ $status == 0 && $out == 3 ]]'

run "$LT" -e 'x = 20' -e 'print(x + 1)'
check "several -e run in order" '[[ $status == 0 && $out == 21 ]]'

run "$LT" -v
check "-v prints the version" '[[ $status == 0 && $out =~ ^lt\ [0-9]+\.[0-9]+\.[0-9]+\ \(Lua\ 5\.4 ]]'

run "$LT" --help
check "--help prints the usage" '[[ $status == 0 && $out == *"usage: lt"* && $out == *"--threads"* ]]'

cat >"$TMP/args.lua" <<'EOF'
print(arg[0], arg[1], arg[2], arg[3], arg[-1], select("#", ...), ...)
EOF
run "$LT" "$TMP/args.lua" a "b c"
check "script gets arg and ..." \
  '[[ $status == 0 && $out == "$TMP/args.lua"$'"'"'\ta\tb c\tnil\t'"$LT"'\t2\ta\tb c'"'"' ]]'

run "$LT" -e 'y = 1' "$TMP/args.lua" z
check "options get negative arg indices" \
  '[[ $status == 0 && $out == "$TMP/args.lua"$'"'"'\tz\tnil\tnil\ty = 1\t1\tz'"'"' ]]'

run bash -c "echo 'print(\"stdin:\", ...)' | '$LT' - p q"
check "- runs stdin with its arguments" '[[ $status == 0 && $out == $'"'"'stdin:\tp\tq'"'"' ]]'

run bash -c "echo 'print(\"piped\")' | '$LT'"
check "no script and stdin not a terminal: stdin is the script" '[[ $status == 0 && $out == piped ]]'

run "$LT" -- "$TMP/args.lua" -v
check "-- ends the options" '[[ $status == 0 && $out == *$'"'"'\t-v\t'"'"'* ]]'

run "$LT" -e 'error("boom")'
check "an error exits 1 with lt: and a traceback" \
  '[[ $status == 1 && $err == "lt: (command line):1: boom"* && $err == *"stack traceback:"* ]]'

cat >"$TMP/fails.lua" <<'EOF'
local function inner() error("deep failure") end
local function outer() inner() end
outer()
EOF
run "$LT" "$TMP/fails.lua"
check "a failing script exits 1 and names its functions" \
  '[[ $status == 1 && $err == *"fails.lua:1: deep failure"* && $err == *"'"'"'inner'"'"'"* && $err == *"in local '"'"'outer'"'"'"* ]]'

run "$LT" -e 'error({})'
check "a non-string error is described" '[[ $status == 1 && $err == *"(error object is a table value)"* ]]'

printf 'x = = 1\n' >"$TMP/syntax.lua"
run "$LT" "$TMP/syntax.lua"
check "a syntax error exits 1" '[[ $status == 1 && $err == "lt: "*"syntax.lua:1:"* ]]'

run "$LT" "$TMP/no_such_script.lua"
check "a missing script exits 1" '[[ $status == 1 && $err == *"cannot open"* ]]'

# --foreground: otherwise timeout signals lt twice (its pid, then its process group), and a
# second Ctrl-C is meant to end a process at once, as in lua.c.
run timeout --foreground --preserve-status -s INT 1 "$LT" -e 'while true do end'
check "Ctrl-C (SIGINT) stops a script: interrupted!, status 1" \
  '[[ $status == 1 && $err == "lt: interrupted!"* && $err == *"stack traceback:"* ]]'

run bash -c "printf '20 + 1\\nfor i = 1, 2 do\\nprint(i * 10)\\nend\\n' | '$LT' -i"
check "-i with piped input reads statements, prints results" \
  '[[ $status == 0 && $out == *"> 21"* && $out == *">> >> 10"*"20"* ]]'

run bash -c "echo 'print(ran_before)' | '$LT' -i '$TMP/args.lua' x"
check "-i script runs the script, then the REPL" \
  '[[ $status == 0 && $out == *"$TMP/args.lua"*"> nil"* ]]'

run "$LT" -x
check "an unknown option exits 1 with the usage" '[[ $status == 1 && $err == *"unrecognized option '"'"'-x'"'"'"* && $err == *usage* ]]'

cat >"$TMP/mymod.lua" <<'EOF'
return { value = 42 }
EOF
run bash -c "cd '$TMP' && '$LT' -l mymod -e 'print(mymod.value)'"
check "-l mod sets the global mod" '[[ $status == 0 && $out == 42 ]]'

run bash -c "cd '$TMP' && '$LT' -l m=mymod -e 'print(m.value, mymod)'"
check "-l g=mod sets the global g" '[[ $status == 0 && $out == $'"'"'42\tnil'"'"' ]]'

run env LUA_INIT='init_ran = "yes"' "$LT" -e 'print(init_ran)'
check "LUA_INIT runs first" '[[ $status == 0 && $out == yes ]]'

run env LUA_INIT_5_4='init_ran = "5.4"' LUA_INIT='init_ran = "plain"' "$LT" -e 'print(init_ran)'
check "LUA_INIT_5_4 wins over LUA_INIT" '[[ $status == 0 && $out == 5.4 ]]'

echo 'init_ran = "from file"' >"$TMP/init.lua"
run env LUA_INIT="@$TMP/init.lua" "$LT" -e 'print(init_ran)'
check "LUA_INIT=@file runs the file" '[[ $status == 0 && $out == "from file" ]]'

run env LUA_INIT='init_ran = "yes"' "$LT" -E -e 'print(init_ran)'
check "-E ignores LUA_INIT" '[[ $status == 0 && $out == nil ]]'

run "$LT" -W -e 'warn("careful")'
check "-W turns warnings on" '[[ $status == 0 && $err == *"careful"* ]]'

# ---- lt's own ----
run "$LT" -e 'print(type(lt), package.loaded.lt == lt)'
check "the global lt is require \"lt\"" '[[ $status == 0 && $out == $'"'"'table\ttrue'"'"' ]]'

run "$LT" --threads 2 -e 'print(lt.get_num_threads())'
check "--threads 2 sets lt.get_num_threads() to 2" '[[ $status == 0 && $out == 2 ]]' \
  "needs lt.set_num_threads / lt.get_num_threads from the bindings"

run "$LT" --threads many -e 'print(1)'
check "--threads with a bad value is a clear error" '[[ $status == 1 && $err == *"--threads: expected a positive integer"* ]]'

run "$LT" --device cpu -e 'print(lt.default_device)'
check "--device cpu works" '[[ $status == 0 && $out == cpu ]]'

run "$LT" -e 'print(lt.cuda ~= nil and lt.cuda.is_available ~= nil and lt.cuda.is_available() == true)'
if [[ $out == true ]]; then
  run "$LT" --device cuda -e 'print(lt.default_device)'
  check "--device cuda works where CUDA is available" '[[ $status == 0 && $out == cuda ]]'
else
  run "$LT" --device cuda -e 'print("ran")'
  check "--device cuda without the CUDA backend is a clear error" \
    '[[ $status == 1 && $out == "" && $err == "lt: --device cuda: CUDA is not available (no CUDA device found"* ]]'
fi

run "$LT" --device tpu -e 'print("ran")'
check "--device with an unknown name is an error" '[[ $status == 1 && $err == *"--device tpu: unknown device"* ]]'

run "$LT" -e 'print(type(lt.memory) == "table" and type(lt.memory.report) == "function")'
if [[ $out == true ]]; then
  run "$LT" --memory-report "$TMP/report.html" -e 'x = 1'
  check "--memory-report writes the report" '[[ $status == 0 && -s $TMP/report.html ]]'
else
  run "$LT" --memory-report "$TMP/report.html" -e 'print("ran")'
  check "--memory-report without lt.memory.report is a clear error before running" \
    '[[ $status == 1 && $out == "" && $err == *"lt.memory.report is not available"* ]]'
fi

# ---- busted under the host ----
if command -v busted >/dev/null 2>&1; then
  mkdir -p "$TMP/spec"
  cat >"$TMP/spec/host_spec.lua" <<'EOF'
describe("the lt host", function()
  it("runs specs with the global lt", function()
    assert.are.equal("table", type(lt))
    assert.are.equal(4, 2 + 2)
  end)
end)
EOF
  run bash -c "cd '$TMP/spec' && busted --lua='$LT' -o utfTerminal host_spec.lua"
  check "busted --lua=lt runs a spec" '[[ $status == 0 && $out == *"1 success / 0 failures / 0 errors"* ]]'
else
  failed=$((failed + 1))
  echo "FAIL - busted --lua=lt runs a spec: busted is not installed"
fi

# ---- a recipe's command-line mistake: the message and usage, no traceback ----
run "$LT" scripts/train_fashion_mlp.lua --epochs x
check "a recipe's bad option is one message, exit 1, no traceback" \
  '[[ $status == 1 && $err == *"option --epochs expects a number, got '"'"'x'"'"'"* && $err != *"stack traceback"* ]]'
run "$LT" scripts/train_fashion_mlp.lua --bogus
check "a recipe's unknown option prints the usage without a traceback" \
  '[[ $status == 1 && $err == *"unknown option '"'"'--bogus'"'"'"* && $err == *"usage: lt"* && $err != *"stack traceback"* && $err != *"(default: )"* ]]'

run "$LT" scripts/train_fashion_mlp.lua --resume
check "a recipe's inconsistent options are one message, exit 1, no traceback" \
  '[[ $status == 1 && $err == *"--resume needs --checkpoint FILE"* && $err != *"stack traceback"* ]]'

run "$LT" scripts/train_fashion_cnn.lua --estimate --batch_size 64
check "a recipe's --estimate prints the predicted peak and trains nothing" \
  '[[ $status == 0 && $out == *"estimated peak of a training step on cpu (batch 64): "*" MiB"* && $out == *"activation"* && $out != *"test accuracy"* ]]'

# ---- the whole chain: host, bindings, engine ----
run "$LT" -e 'print(lt.ones(2, 3):sum():item())'
if [[ $status == 0 && $out == 6.0 ]]; then
  check "lt.ones(2, 3):sum():item() prints 6.0" 'true'
else
  diagnosis=$("$LT" -e '
    if type(lt.ones) ~= "function" then return print("lt.ones is missing") end
    local ok, t = pcall(lt.ones, 2, 3)
    if not ok then return print("lt.ones(2, 3) failed: " .. tostring(t)) end
    local ok2, s = pcall(function() return t:sum() end)
    if not ok2 then return print("t:sum() failed: " .. tostring(s)) end
    local ok3, v = pcall(function() return s:item() end)
    if not ok3 then return print(":item() failed: " .. tostring(v)) end
    print("t:sum():item() returned " .. tostring(v) .. " (" .. (math.type(v) or type(v)) .. ")")' 2>&1)
  check "lt.ones(2, 3):sum():item() prints 6.0" 'false' "tensor bindings: $diagnosis"
fi

echo "test_cli: $passed passed, $failed failed"
[[ $failed == 0 ]]
