#!/usr/bin/env bash
# Packs what a GPU machine needs to build and test lt but may not have, for
# the device tool's `carry`: the GPU machine has nvcc, cuBLAS, cuDNN (PyTorch's
# wheels), CMake and gcc but no Debian packages and no network. Run here, after
# scripts/setup.sh, then carry .gpu_bundle; scripts/gpu_env.sh unpacks it there.
#   scripts/gpu_bundle.sh            -> .gpu_bundle/deps.tar.xz and .gpu_bundle/fashion-mnist/
# The files come from the installed Debian packages (dpkg -L), without docs,
# manuals and static libraries; every symlink inside is relative (files of
# /lib are stored under usr/lib) or fixed up by gpu_env.sh. Fashion-MNIST's
# training set is cut to its first 19200 images (300 steps at batch 128 over
# two epochs) to fit the carry limit.
set -euo pipefail
cd "$(dirname "$0")/.."
out=.gpu_bundle
packages=(lua5.4 liblua5.4-0 liblua5.4-dev libreadline8
          lua-busted lua-cliargs lua-dkjson lua-filesystem lua-luassert lua-mediator lua-penlight
          lua-say lua-system lua-term
          libopenblas0-pthread libopenblas-pthread-dev libdnnl2 libdnnl-dev
          libedit2 libedit-dev libbsd0 libmd0 zlib1g zlib1g-dev pkgconf pkgconf-bin libpkgconf3)
rm -rf "$out"
mkdir -p "$out/fashion-mnist"
list=$(mktemp)
for p in "${packages[@]}"; do
  dpkg -L "$p" | while read -r f; do
    [ -f "$f" ] || [ -L "$f" ] || continue
    [ -L "$f" ] && [ -d "$f" ] && continue # /lib itself: merged /usr, see the transform
    case "$f" in
      /usr/share/doc/*|/usr/share/man/*|/usr/share/lintian/*|*.a) continue ;;
    esac
    printf '%s\n' "${f#/}"
  done
done | sort -u >"$list"
# Debian 12 merges /lib into /usr/lib: store such files under usr/lib.
tar -C / --transform 's,^lib/,usr/lib/,' -cJf "$out/deps.tar.xz" -T "$list"
rm -f "$list"

python3 - "$out/fashion-mnist" <<'PY'
import gzip, shutil, struct, sys
src, dst, keep = "/usr/share/datasets/fashion-mnist", sys.argv[1], 19200
for name, header in (("train-images-idx3-ubyte", 16), ("train-labels-idx1-ubyte", 8)):
    with gzip.open(f"{src}/{name}.gz") as f:
        head = bytearray(f.read(header))
        per = 28 * 28 if header == 16 else 1
        body = f.read(keep * per)
    head[4:8] = struct.pack(">I", keep)  # the IDX count of items
    with gzip.open(f"{dst}/{name}.gz", "wb", compresslevel=9) as f:
        f.write(bytes(head) + body)
for name in ("t10k-images-idx3-ubyte", "t10k-labels-idx1-ubyte"):
    shutil.copy(f"{src}/{name}.gz", dst)
PY
du -sh "$out"/* "$out"
