#!/usr/bin/env bash
# `lt --memory-report FILE script.lua`: the page is written for any script and
# renders in headless Chromium: its script draws one area per category that
# held bytes, the marks carry their labels, and the screenshot shows the
# category colours. The screenshot is kept as <build-dir>/test_memory_report.png.
# Usage: bash tests/host/test_memory_report.sh path/to/lt [build-dir]
set -u

LT=${1:?usage: test_memory_report.sh path/to/lt [build-dir]}
BUILD_DIR=${2:-}
if [[ ! -x $LT ]]; then
  echo "test_memory_report: no lt executable at '$LT'" >&2
  exit 1
fi
LT=$(cd "$(dirname "$LT")" && pwd)/$(basename "$LT")
CHROMIUM=$(command -v chromium || command -v chromium-browser || true)
if [[ -z $CHROMIUM ]]; then
  echo "FAIL - chromium is not installed: the memory report must be checked in a real browser." >&2
  echo "       Install Debian's package (scripts/setup.sh does): apt-get install -y chromium" >&2
  exit 1
fi
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT

# check, browse and the counters
source "$(dirname "$0")/page_checks.sh"

# ---- a small training-like script that records ----
cat >"$TMP/train.lua" <<'EOF'
local cat = lt.memory.set_category
-- Warm the cache first, so that the timeline is not stretched by the system
-- faulting in fresh segments.
lt.del(lt.zeros(8 * 1024 * 1024)); lt.del(lt.zeros(64 * 1024))
lt.memory.record(true)
local weights, state, grads = {}, {}, {}
for i = 1, 3 do weights[i] = cat(lt.zeros(256, 256), "parameter") end
for epoch = 1, 2 do
  lt.memory.mark("epoch " .. epoch)
  local saved = {}
  for i = 1, 6 do saved[i] = cat(lt.zeros(64, 1024 * i), "activation") end
  local scratch = lt.zeros(512, 512) -- stays "other"
  for i = 1, 3 do grads[i] = grads[i] or cat(lt.zeros(256, 256), "gradient") end
  for i = 1, 3 do state[i] = state[i] or cat(lt.zeros(256, 512), "optimizer") end
  local dropped = lt.zeros(768, 1024) -- garbage until the collection below
  dropped = nil
  lt.del(scratch)
  for i = #saved, 1, -1 do lt.del(saved[i]) end
  collectgarbage()
end
print("trained")
EOF

out=$("$LT" --memory-report "$TMP/r.html" "$TMP/train.lua" 2>"$TMP/stderr")
status=$?
check "--memory-report runs the script and exits 0" '[[ $status == 0 && $out == trained ]]' "stderr: $(cat "$TMP/stderr")"
check "the report file is written" '[[ -s $TMP/r.html ]]'
page=$(cat "$TMP/r.html" 2>/dev/null)
check "the page names the script in its title" '[[ $page == *"<title>lt memory report: $TMP/train.lua</title>"* ]]'
check "the page fetches nothing (no src=, href=, <link, @import)" \
  '[[ $page != *" src="* && $page != *"href="* && $page != *"<link"* && $page != *"@import"* ]]'

# ---- rendered: the DOM after the page's script ran ----
dom=$(browse --dump-dom "file://$TMP/r.html")
check "Chromium ran the drawing script (body data-chart=drawn)" '[[ $dom == *"data-chart=\"drawn\""* ]]' \
  "chromium log: $(tail -3 "$TMP/chromium.log")"
areas=$(grep -o '<path class="area" data-category="[a-z]*"' <<<"$dom" | sed 's/.*data-category="\([a-z]*\)"/\1/' | tr '\n' ' ')
check "one area per non-empty category, stacked bottom to top, garbage last" \
  '[[ $areas == "parameter gradient optimizer activation other garbage " ]]' "areas: '$areas'"
check "no area for the empty workspace category" '[[ $areas != *workspace* ]]'
marks=$(grep -o '<g class="mark" data-label="[^"]*"' <<<"$dom" | sed 's/.*data-label="\([^"]*\)"/\1/' | tr '\n' ',')
check "both marks are drawn, in order" '[[ $marks == "epoch 1,epoch 2," ]]' "marks: '$marks'"
check "mark labels are on the chart" '[[ $dom == *">epoch 1</text>"* && $dom == *">epoch 2</text>"* ]]'
check "the peak is labelled" '[[ $dom =~ \>peak\ [0-9.]+\ MiB\</text\> ]]'
check "the y axis is in MiB" '[[ $dom == *"allocated (MiB)"* ]]'
check "the legend lists every category" \
  '[[ $dom == *"data-category=\"parameter\""* && $dom == *"data-category=\"workspace\""* ]]'
check "the reserved line is drawn above the areas" '[[ $dom == *"<path class=\"reserved\""* ]]'
check "the segments table is on the page" '[[ $dom == *"Segments at the peak on cpu"* && $dom == *"largest free"* ]]'
check "the legend explains the garbage band" '[[ $dom == *"data-category=\"garbage\""* && $dom == *"the longest they can have been garbage"* ]]'
origin_rows=$(grep -c "<td class=\"origin\">$TMP/train.lua:[0-9]*</td>" <<<"$dom")
check "top allocations at the peak name the script's lines" '(( origin_rows >= 10 ))' "rows: $origin_rows"

# ---- rendered: the screenshot ----
browse --screenshot="$TMP/shot.png" --window-size=1200,900 "file://$TMP/r.html" >/dev/null
shot_size=$(stat -c %s "$TMP/shot.png" 2>/dev/null || echo 0)
check "the screenshot exists and is not blank (> 30 KB)" '(( shot_size > 30000 ))' "size: $shot_size bytes"
if [[ -n $BUILD_DIR && -d $BUILD_DIR && -s $TMP/shot.png ]]; then
  cp "$TMP/shot.png" "$BUILD_DIR/test_memory_report.png"
  echo "     screenshot kept at $BUILD_DIR/test_memory_report.png"
fi
# The colours are counted on the event-order axis (report.html#order): on the
# time axis an area's width is how long its bytes were held, which a loaded
# machine stretches or squeezes (a pause before the gradients were made once
# left them 117 pixels); in event order the same script paints the same
# picture on any machine.
browse --screenshot="$TMP/order.png" --window-size=1200,900 "file://$TMP/r.html#order" >/dev/null
# Pixels of each category's colour (as painted: 88% opaque on white), read
# with the standard library only: a PNG decoder for 8-bit RGB/RGBA.
colours=$(python3 - "$TMP/order.png" "$(dirname "$0")" <<'EOF'
import sys
sys.path.insert(0, sys.argv[2])
from png_rows import rows as png_rows
rows, stride, bpp = png_rows(sys.argv[1])
colours = {"parameter": "4e79a7", "gradient": "f28e2b", "optimizer": "59a14f",
           "activation": "e15759", "other": "9d8fb8", "workspace": "8c8c8c", "garbage": "e8c547",
           "reserved": "0a7f8c"}
counts = {}
for name, hexcode in colours.items():
    # the areas are 88% opaque on white; the reserved line is opaque
    alpha = 1.0 if name == "reserved" else 0.88
    want = [round(int(hexcode[k:k + 2], 16) * alpha + 255 * (1 - alpha)) for k in (0, 2, 4)]
    counts[name] = 0
    for line in rows:
        for x in range(0, stride, bpp):
            if all(abs(line[x + k] - want[k]) <= 6 for k in range(3)):
                counts[name] += 1
print(" ".join(f"{k}={v}" for k, v in counts.items()))
EOF
)
echo "     painted pixels by category colour (event order): $colours"
painted=0
for c in parameter gradient optimizer activation other; do
  n=$(grep -o "$c=[0-9]*" <<<"$colours" | cut -d= -f2)
  (( ${n:-0} > 300 )) && painted=$((painted + 1))
done
check "the event-order screenshot shows the five used category colours (> 300 pixels each)" '(( painted == 5 ))' "$colours"
garbage_px=$(grep -o "garbage=[0-9]*" <<<"$colours" | cut -d= -f2)
reserved_px=$(grep -o "reserved=[0-9]*" <<<"$colours" | cut -d= -f2)
check "the event-order screenshot shows the garbage band (> 300 pixels)" '(( ${garbage_px:-0} > 300 ))' "$colours"
check "the event-order screenshot shows the reserved line (> 300 pixels)" '(( ${reserved_px:-0} > 300 ))' "$colours"

# ---- --memory-report records from the start: a script without record(true) ----
out=$("$LT" --memory-report "$TMP/flag.html" -e 'local t = lt.zeros(1000); lt.memory.mark("made")' 2>"$TMP/stderr")
status=$?
flag_dom=$(browse --dump-dom "file://$TMP/flag.html")
check "--memory-report alone gives a timeline (no record(true) in the script)" \
  '[[ $status == 0 && $flag_dom == *"<svg"* && $flag_dom == *"data-label=\"made\""* ]]'

# ---- lt.memory.report without a recording: still a page, with a note ----
out=$("$LT" -e "local t = lt.zeros(1000); lt.memory.report('$TMP/plain.html')" 2>"$TMP/stderr")
status=$?
plain=$(cat "$TMP/plain.html" 2>/dev/null)
check "without record(true) the page says how to get a timeline" \
  '[[ $status == 0 && $plain == *"No timeline"* && $plain == *"lt.memory.record(true)"* && $plain == *"lt memory summary"* ]]'
plain_dom=$(browse --dump-dom "file://$TMP/plain.html")
check "that page renders too" '[[ $plain_dom == *"Allocator summary"* && $plain_dom != *"<svg"* ]]'

# ---- a failing script still gets its report ----
echo 'lt.memory.record(true); local t = lt.zeros(10); error("boom")' >"$TMP/fails.lua"
out=$("$LT" --memory-report "$TMP/failed.html" "$TMP/fails.lua" 2>"$TMP/stderr")
status=$?
check "a failing script exits non-zero and its report is written" '[[ $status != 0 && -s $TMP/failed.html ]]'

echo "test_memory_report: $passed passed, $failed failed"
(( failed == 0 ))
