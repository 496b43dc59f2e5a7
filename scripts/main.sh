#!/usr/bin/env bash
# The main job: build lt and run the demo recipe.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh build
exec build/lt scripts/demo.lua "$@"
