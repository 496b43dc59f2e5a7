#!/usr/bin/env bash
# A short recipe run with --metrics and --plot: the JSON lines parse and hold
# the step and epoch records, the page renders in headless Chromium with its
# four charts (the series, the epoch marks, the legend), the screenshot shows
# the series' colours, and lt.plot draws the same page from the file on its
# own. Also what the run printed: into a pipe plain lines that name each
# field; on a terminal (under script(1)) a bar redrawn in place with elapsed,
# ETA and rate, and the evaluation's own bar. The screenshot is kept as
# <build-dir>/test_plot.png.
# Usage: bash tests/host/test_plot.sh path/to/lt [build-dir]
set -u

LT=${1:?usage: test_plot.sh path/to/lt [build-dir]}
BUILD_DIR=${2:-}
if [[ ! -x $LT ]]; then
  echo "test_plot: no lt executable at '$LT'" >&2
  exit 1
fi
LT=$(cd "$(dirname "$LT")" && pwd)/$(basename "$LT")
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
CHROMIUM=$(command -v chromium || command -v chromium-browser || true)
if [[ -z $CHROMIUM ]]; then
  echo "FAIL - chromium is not installed: the plot must be checked in a real browser." >&2
  echo "       Install Debian's package (scripts/setup.sh does): apt-get install -y chromium" >&2
  exit 1
fi
if [[ ! -e /usr/share/datasets/fashion-mnist/train-images-idx3-ubyte.gz ]]; then
  echo "FAIL - Fashion-MNIST is not installed: apt-get install -y dataset-fashion-mnist" >&2
  exit 1
fi
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT

# check, browse and the counters
source "$(dirname "$0")/page_checks.sh"

# ---- a short run: 2 epochs of 2000 images (16 steps each), logged every 2 steps ----
cd "$ROOT" || exit 1
out=$("$LT" scripts/train_fashion_mlp.lua --epochs 2 --limit 2000 --threads 2 --log_every 2 \
  --metrics "$TMP/m.jsonl" --plot "$TMP/p.html" 2>"$TMP/stderr")
status=$?
check "the recipe runs with --metrics and --plot and exits 0" '[[ $status == 0 && $out == *"test accuracy 0."* ]]' \
  "stderr: $(cat "$TMP/stderr")"

# ---- what it printed into a pipe: plain lines, each field named ----
check "into a pipe: no redraws (no carriage return)" '[[ $out != *$'"'"'\r'"'"'* ]]'
check "the epoch's line names its mean loss and the rate, and the time it took" \
  '[[ $out =~ epoch\ 1/2\ +16/16\ \(100%\)\ +took\ [0-9.]+\ s\ +[0-9.]+\ batch/s\ +epoch\ mean\ loss\ [0-9.]+\ +lr\ 0\.0500 ]]' "$out"
check "the evaluation is a line of its own with the test loss and accuracy (2000 test images: 2 batches)" \
  '[[ $out =~ eval\ +2/2\ \(100%\)\ +took\ [0-9.]+\ s\ +[0-9.]+\ batch/s\ +test\ loss\ [0-9.]+\ +test\ accuracy\ 0\.[0-9]{4} ]]' "$out"
check "the last line is still the accuracy" '[[ $(tail -n 1 <<<"$out") =~ ^test\ accuracy\ 0\.[0-9]{4}$ ]]'

# ---- the JSON lines ----
summary=$(python3 - "$TMP/m.jsonl" <<'EOF'
import json, sys
kinds, steps, epochs, bad = {}, [], [], 0
for line in open(sys.argv[1]):
    r = json.loads(line)
    kinds[r["kind"]] = kinds.get(r["kind"], 0) + 1
    if r["kind"] == "step":
        steps.append(r["step"])
        need = ("epoch", "batch_loss", "lr", "time", "memory_allocated", "memory_reserved", "memory_max_allocated")
        bad += not all(k in r for k in need)
    if r["kind"] == "epoch":
        epochs.append(r["epoch"])
        need = ("step", "epoch_mean_loss", "test_loss", "test_accuracy", "lr", "train_seconds", "eval_seconds")
        bad += not all(k in r for k in need)
print(f"kinds={kinds.get('start', 0)},{kinds.get('step', 0)},{kinds.get('epoch', 0)} "
      f"first={steps[:3]} epochs={epochs} bad={bad}")
EOF
)
check "every line is JSON: a start, 17 steps (1, 2, 4, ... 32) and 2 epochs, each with its fields" \
  '[[ $summary == "kinds=1,17,2 first=[1, 2, 4] epochs=[1, 2] bad=0" ]]' "$summary"

# ---- the page ----
page=$(cat "$TMP/p.html" 2>/dev/null)
check "the page names the recipe in its title" '[[ $page == *"<title>lt training run: scripts/train_fashion_mlp.lua</title>"* ]]'
check "the page fetches nothing (no src=, href=, <link, @import, no script)" \
  '[[ $page != *" src="* && $page != *"href="* && $page != *"<link"* && $page != *"@import"* && $page != *"<script"* ]]'

dom=$(browse --dump-dom "file://$TMP/p.html")
charts=$(grep -o '<svg class="chart" data-chart="[a-z]*"' <<<"$dom" | sed 's/.*data-chart="\([a-z]*\)"/\1/' | tr '\n' ' ')
check "Chromium shows the four charts in order" '[[ $charts == "loss accuracy lr memory " ]]' "charts: '$charts'"
series=$(grep -o '<polyline class="series" data-series="[^"]*" data-points="[0-9]*"' <<<"$dom" |
  sed 's/.*data-series="\([^"]*\)" data-points="\([0-9]*\)"/\1=\2/' | tr '\n' ',')
# (Steps 16 and 32 have a step and an epoch record: one point each.)
check "each series is drawn with all its points" \
  '[[ $series == "batch loss=17,epoch mean loss=2,test loss=2,test accuracy=2,learning rate=17,allocated=17,reserved=17,peak allocated=17," ]]' \
  "series: '$series'"
epoch_marks=$(grep -o '<line class="epoch" data-epoch="[0-9]*"' <<<"$dom" | wc -l)
check "the two epoch ends are marked on each chart" '(( epoch_marks == 8 ))' "marks: $epoch_marks"
check "the axes are labelled" '[[ $dom == *">step</text>"* && $dom == *">cross-entropy loss</text>"* && $dom == *">MiB</text>"* ]]'
check "the legend gives each series' last value" '[[ $dom =~ test\ accuracy\ \<span\ class=\"last\"\>last\ 0\.[0-9]+ ]]'
check "the cards and the epoch table are on the page" \
  '[[ $dom == *"final test accuracy"* && $dom == *"<th>epoch mean loss</th>"* && $dom == *"Memory on cpu"* ]]'

# ---- the screenshot: not blank, and the series' colours painted ----
browse --screenshot="$TMP/shot.png" --window-size=1200,1300 "file://$TMP/p.html" >/dev/null
shot_size=$(stat -c %s "$TMP/shot.png" 2>/dev/null || echo 0)
check "the screenshot exists and is not blank (> 30 KB)" '(( shot_size > 30000 ))' "size: $shot_size bytes"
if [[ -n $BUILD_DIR && -d $BUILD_DIR && -s $TMP/shot.png ]]; then
  cp "$TMP/shot.png" "$BUILD_DIR/test_plot.png"
  echo "     screenshot kept at $BUILD_DIR/test_plot.png"
fi
# Pixels of each series' colour (lines are opaque; antialiased edges are
# not counted), read with the standard library only: a PNG decoder for
# 8-bit RGB/RGBA.
colours=$(python3 - "$TMP/shot.png" "$(dirname "$0")" <<'EOF'
import sys
sys.path.insert(0, sys.argv[2])
from png_rows import rows as png_rows
rows, stride, bpp = png_rows(sys.argv[1])
colours = {"batch_loss": "9ecae1", "epoch_mean_loss": "1f4e9c", "test_loss": "d62728",
           "test_accuracy": "2ca02c", "learning_rate": "9467bd", "allocated": "ff7f0e",
           "reserved": "17becf", "peak_allocated": "8c564b"}
wants = {name: [int(code[k:k + 2], 16) for k in (0, 2, 4)] for name, code in colours.items()}
counts = dict.fromkeys(colours, 0)
for line in rows:
    for x in range(0, stride, bpp):
        px = line[x:x + 3]
        for name, want in wants.items():
            if abs(px[0] - want[0]) <= 6 and abs(px[1] - want[1]) <= 6 and abs(px[2] - want[2]) <= 6:
                counts[name] += 1
print(" ".join(f"{k}={v}" for k, v in counts.items()))
EOF
)
echo "     painted pixels by series colour: $colours"
painted=0
for c in batch_loss epoch_mean_loss test_loss test_accuracy learning_rate allocated reserved peak_allocated; do
  n=$(tr ' ' '\n' <<<"$colours" | grep "^$c=" | cut -d= -f2)
  (( ${n:-0} > 100 )) && painted=$((painted + 1))
done
check "the screenshot shows all eight series' colours (> 100 pixels each)" '(( painted == 8 ))' "$colours"

# ---- lt.plot on its own, from the metrics file ----
out=$("$LT" -e "lt.plot('$TMP/m.jsonl', '$TMP/again.html', {title = 'from the file'})" 2>"$TMP/stderr")
status=$?
again=$(browse --dump-dom "file://$TMP/again.html")
n_charts=$(grep -o '<svg class="chart"' <<<"$again" | wc -l)
check "lt.plot(file, out, {title=}) draws the same four charts under its title" \
  '[[ $status == 0 && $n_charts == 4 && $again == *"<h1>from the file</h1>"* ]]' "stderr: $(cat "$TMP/stderr")"

# ---- on a terminal: the bar redrawn in place, evaluation included ----
if command -v script >/dev/null; then
  COLUMNS=150 script -qec "'$LT' scripts/train_fashion_mlp.lua --epochs 1 --limit 6000 --threads 2" /dev/null \
    >"$TMP/tty.out" 2>&1 </dev/null
  tty=$(tr '\r' '\n' <"$TMP/tty.out")
  check "on a terminal the bar is redrawn in place (carriage returns)" '(( $(grep -c $'"'"'\r'"'"' "$TMP/tty.out") > 0 ))'
  check "a running bar shows percent, bar, count, elapsed, ETA, rate and the batch loss, each named" \
    '[[ $tty =~ epoch\ 1/1\ +[0-9]+%\ \[[=\>\ ]{20}\]\ +[0-9]+/47\ +elapsed\ [0-9]{2}:[0-9]{2}\ +ETA\ [0-9]{2}:[0-9]{2}\ +[0-9.]+\ batch/s\ +batch\ loss\ [0-9.]+ ]]' \
    "$(head -c 600 <<<"$tty")"
  check "the epoch's final line has the total time and the epoch mean loss, not the batch loss" \
    '[[ $tty =~ epoch\ 1/1\ +100%\ \[={20}\]\ +47/47\ +took\ [0-9.]+\ s\ +[0-9.]+\ batch/s\ +epoch\ mean\ loss\ [0-9.]+\ +lr\ [0-9.]+ ]]' "$tty"
  check "the evaluation has its own bar (6 batches of the 6000 test images)" \
    '[[ $tty =~ eval\ +100%\ \[={20}\]\ +6/6\ +took\ [0-9.]+\ s\ +[0-9.]+\ batch/s\ +test\ loss\ [0-9.]+\ +test\ accuracy\ 0\.[0-9]{4} ]]' "$tty"
else
  echo "skip - script(1) is not installed: the terminal bar is not checked"
fi

echo "test_plot: $passed passed, $failed failed"
(( failed == 0 ))
