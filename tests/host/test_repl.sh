#!/usr/bin/env bash
# The lt REPL, driven through a real terminal: tmux on a private socket, keys sent with
# send-keys, the screen read back with capture-pane.
# Usage: bash tests/host/test_repl.sh path/to/lt [build-dir]
set -u

LT=${1:?usage: test_repl.sh path/to/lt [build-dir]}
if [[ ! -x $LT ]]; then
  echo "test_repl: no lt executable at '$LT'" >&2
  exit 1
fi
if ! command -v tmux >/dev/null 2>&1; then
  echo "test_repl: FAIL - tmux is required to drive the REPL" >&2
  exit 1
fi
LT=$(cd "$(dirname "$LT")" && pwd)/$(basename "$LT")
TIMEOUT=${LT_TEST_TIMEOUT:-5} # seconds to wait for each expected screen
TMP=$(mktemp -d)
# One private server per session: a new session on a server being killed can fail.
SESSIONS=0
SOCKETS=()
TMUX_CMD=(tmux -L "lttest$$" -f /dev/null)
cleanup() {
  for socket in "${SOCKETS[@]}"; do
    tmux -L "$socket" kill-server >/dev/null 2>&1
    rm -f "${TMUX_TMPDIR:-/tmp}/tmux-$(id -u)/$socket" # tmux leaves the socket file behind
  done
  rm -rf "$TMP"
}
trap cleanup EXIT

HISTORY_FILE=$TMP/history
passed=0
failed=0

ok() { passed=$((passed + 1)); echo "ok   - $1"; }
not_ok() {
  failed=$((failed + 1))
  echo "FAIL - $1"
  [[ -n ${2:-} ]] && echo "       note: $2"
  echo "       screen (last 15 lines):"
  screen | grep -v '^$' | tail -n 15 | sed 's/^/         | /'
}

# The whole pane, scrollback included, so counts of lines only grow.
screen() { "${TMUX_CMD[@]}" capture-pane -p -J -S - -t lt 2>/dev/null; }
count_lines() { screen | grep -cE -- "$1"; }

# Starts lt in a fresh session; "LT-EXITED-<status>" appears when it ends.
start_session() {
  ((SESSIONS > 0)) && "${TMUX_CMD[@]}" kill-server >/dev/null 2>&1
  SESSIONS=$((SESSIONS + 1))
  SOCKETS+=("lttest$$-$SESSIONS")
  TMUX_CMD=(tmux -L "lttest$$-$SESSIONS" -f /dev/null)
  "${TMUX_CMD[@]}" new-session -d -s lt -x 120 -y 40 \
    "cd '$TMP' && HOME='$TMP' LT_HISTORY='$HISTORY_FILE' '$LT'; echo LT-EXITED-\$?; sleep 60"
  wait_for_new '^> ' 0 || return 1
}

# wait_for_new REGEX BEFORE: waits until more than BEFORE lines match REGEX.
wait_for_new() {
  local deadline=$((SECONDS + TIMEOUT))
  while ((SECONDS <= deadline)); do
    (($(count_lines "$1") > $2)) && return 0
    sleep 0.1
  done
  return 1
}

type_text() { "${TMUX_CMD[@]}" send-keys -t lt -l -- "$1"; }
press() { "${TMUX_CMD[@]}" send-keys -t lt "$@"; }

# enter LINE REGEX NAME [NOTE]: types LINE and Enter, expects a new line matching REGEX.
enter() {
  local before
  before=$(count_lines "$2")
  type_text "$1"
  press Enter
  if wait_for_new "$2" "$before"; then ok "$3"; else not_ok "$3" "${4:-}"; fi
}

# cancel_line: Ctrl-C at the prompt, then waits for the fresh empty prompt, so that what is
# typed next cannot reach the line editor before it has dropped the old line (under load it
# did: the next command was lost).
cancel_line() {
  local before
  before=$(count_lines '^> *$')
  press C-c
  wait_for_new '^> *$' "$before" || echo "       (no fresh prompt after Ctrl-C)"
}

# enter_quiet LINE NAME: types LINE and Enter; passes when the next screen line is the
# prompt of a probe statement, i.e. LINE printed nothing.
# wait_ran LINE: waits until LINE was entered and lt is back at an empty prompt (the last two
# non-blank screen lines are "> LINE" and "> "), so that the next keys reach a fresh prompt:
# typed while a slow statement still ran (under the sanitizers), they landed on its line.
wait_ran() {
  local deadline=$((SECONDS + TIMEOUT)) first last
  while ((SECONDS <= deadline)); do
    { read -r first; read -r last; } < <(screen | grep -v '^$' | tail -n 2)
    [[ $first == "> $1"* && $last =~ ^\>\ ?$ ]] && return 0
    sleep 0.1
  done
  return 1
}

probes=0
enter_quiet() {
  probes=$((probes + 1))
  local probe="print(\"probe-$probes\")"
  type_text "$1"
  press Enter
  wait_ran "$1" || echo "       (no fresh prompt after: $1)"
  type_text "$probe"
  press Enter
  if wait_for_new "^probe-$probes\$" 0 &&
     screen | grep -A1 -xF -- "> $1" | tail -n 1 | grep -qxF -- "> $probe"; then
    ok "$2"
  else
    not_ok "$2"
  fi
}

if ! start_session; then
  not_ok "the REPL starts and shows the prompt '> '"
  echo "test_repl: $passed passed, $failed failed"
  exit 1
fi
ok "the REPL starts and shows the prompt '> '"

enter '1+1' '^2$' "an expression is printed: 1+1 shows 2"
enter '_ * 1000' '^2000$' "_ holds the last result"
enter_quiet 'local unused = 5' "a statement without results prints nothing"
enter '_ + 1' '^2001$' "_ is kept when a statement returns nothing"
enter '"a", nil, 3' '^a\s+nil\s+3$' "every returned value is printed"

type_text 'for i = 1, 2 do'
press Enter
if wait_for_new '^>> ' 0; then ok "an incomplete statement continues with '>> '"; else not_ok "an incomplete statement continues with '>> '"; fi
type_text 'print(i * 111)'
press Enter
enter 'end' '^222$' "a multi-line statement runs when complete"
if (($(count_lines '^111$') == 1)); then ok "the loop ran once per iteration"; else not_ok "the loop ran once per iteration"; fi

enter 'error("repl-boom")' 'repl-boom' "an error shows its message"
enter 'print(3 * 11)' '^33$' "the prompt still works after an error"

type_text 'print("looping") while true do end'
press Enter
wait_for_new '^looping$' 0 || echo "       (the endless loop did not start)"
sleep 0.2
before=$(count_lines 'interrupted!')
press C-c
if wait_for_new 'interrupted!' "$before"; then ok "Ctrl-C stops a running statement"; else not_ok "Ctrl-C stops a running statement"; fi
enter 'print(40 + 2)' '^42$' "the session goes on after Ctrl-C"

type_text 'this line is dropped'
cancel_line
enter 'print(5 * 5)' '^25$' "Ctrl-C at the prompt clears the line"

type_text 'string.fo'
press Tab
enter '("<%d>", 77)' '^<77>$' "Tab completes string.fo to string.format"

enter_quiet 'obj = setmetatable({}, {__index = {hello_method = function() return "hi" end}})' \
  "a table with methods in its metatable"
type_text 'obj:hello_m'
press Tab
enter '()' '^hi$' "Tab completes methods through a metatable's __index (obj:hello_m)"

type_text 'io.stdout:writ'
press Tab
enter '("written", "\n")' '^written$' "Tab completes a userdata's methods (io.stdout:writ)"

type_text 'lt._set_gr'
press Tab
enter '' '^(function|builtin)' "a private name completes once its '_' is typed (lt._set_gr)"
type_text 'lt.'
press Tab
press Tab
if wait_for_new 'manual_seed' 0 && (($(count_lines '_autocast_state') == 0)); then
  ok "lt.<Tab><Tab> lists lt's names but no private '_' ones"
else
  not_ok "lt.<Tab><Tab> lists lt's names but no private '_' ones"
fi
cancel_line

# IPython's and trepl's help syntax: ?x and x? print lt.help's doc (lua/lt/help/).
enter '?lt.nn.Linear' '^nn\.Linear\(in_features, out_features, \{bias=true' "?lt.nn.Linear prints nn.Linear's doc"
enter '?lt.randn' '^lt\.randn\(size\.\.\., \{dtype=, device=, requires_grad=\}\)$' "?lt.randn prints lt.randn's doc"
enter 't:sum?' '^t:sum\(\[dims\] \[, keepdim\]\)$' "t:sum? prints the doc of the tensor method"
enter '?lt.nn.Lineer' "no entry for 'lt.nn.Lineer' \(did you mean 'nn.Linear'\?\)" "?name with a typo says which name was meant"
enter 'help(lt.nn.ReLU)' '^nn\.ReLU\(\{inplace=false\}\)$' "help(x) prints the doc too"

enter 'print("history-marker-" .. 123)' '^history-marker-123$' "a line to find in the history"

enter 'lt.ones(2,2)' 'tensor\(' "a tensor prints through tostring" \
  "needs the tensor bindings: lt.ones and the tensor's __tostring"
enter_quiet 't = lt.ones(2, 2)' "a tensor in a global"
enter 't.shape' '^\{2, 2\}$' "a table result prints readably: t.shape shows {2, 2}"
enter '{lr = 0.1, 3, nested = {t}}' '^\{3, lr = 0.1, nested = \{<float32 tensor \{2, 2\}>\}\}$' \
  "a table prints its list, sorted keys and tensors as summaries"
type_text 't:nume'
press Tab
enter '()' '^4$' "Tab completes a tensor's methods (t:nume -> t:numel)" \
  "needs the tensor bindings: t:numel() in the tensor metatable"
enter_quiet 'lin = lt.nn.Linear(2, 3)' "a module made at the prompt"
type_text 'lin:num_param'
press Tab
enter '()' '^9$' "Tab completes a module's methods up its class chain (lin:num_param -> Module's num_parameters)"

before=$(count_lines '^LT-EXITED-0$')
press C-d
if wait_for_new '^LT-EXITED-0$' "$before"; then ok "Ctrl-D exits with status 0"; else not_ok "Ctrl-D exits with status 0"; fi

if grep -qF 'print("history-marker-" .. 123)' "$HISTORY_FILE" 2>/dev/null; then
  ok "the entry is in the history file afterwards"
else
  failed=$((failed + 1))
  echo "FAIL - the entry is in the history file afterwards ($HISTORY_FILE):"
  sed 's/^/         | /' "$HISTORY_FILE" 2>/dev/null
fi
if grep -qxF 'for i = 1, 2 do\nprint(i * 111)\nend' "$HISTORY_FILE" 2>/dev/null; then
  ok "a multi-line statement is one history entry"
else
  failed=$((failed + 1))
  echo "FAIL - a multi-line statement is one history entry"
fi

# A second session finds the first one's history.
if start_session; then
  found=0
  for _ in 1 2 3 4 5 6 7 8 9 10; do # back through the history until the marker shows
    press Up
    if TIMEOUT=1 wait_for_new '^> print\("history-marker-" \.\. 123\)' 0; then found=1; break; fi
  done
  if ((found)); then
    ok "a new session loads the history (Up arrow)"
  else
    not_ok "a new session loads the history (Up arrow)"
  fi
else
  not_ok "a second session starts"
fi

echo "test_repl: $passed passed, $failed failed"
[[ $failed == 0 ]]
