# Sourced by the host tests that check a page lt writes in headless Chromium
# (test_memory_report.sh, test_plot.sh): the counters, check and browse. The test sets
# CHROMIUM and TMP before sourcing.

passed=0
failed=0
status=0

# check NAME CONDITION [DETAIL]: CONDITION is a bash expression.
check() {
  if eval "$2"; then
    passed=$((passed + 1))
    echo "ok   - $1"
  else
    failed=$((failed + 1))
    echo "FAIL - $1"
    echo "       expected: $2"
    [[ -n ${3:-} ]] && echo "       $3"
  fi
}

# Headless Chromium with a profile of its own; its chatter (dbus, GPU) goes to a log.
browse() {
  "$CHROMIUM" --headless --disable-gpu --no-sandbox --user-data-dir="$TMP/profile" \
    --hide-scrollbars "$@" 2>>"$TMP/chromium.log"
}
