# Sourced by scripts/gpu_check.sh on a GPU machine: makes what lt's build and
# tests need findable there. Where the machine lacks Debian's Lua 5.4, busted,
# OpenBLAS, oneDNN or libedit, it unpacks .gpu_bundle/deps.tar.xz (made here
# by scripts/gpu_bundle.sh) under /tmp/ltdeps and points the build, the
# loader, pkg-config and Lua there; it finds cuDNN in the CUDA toolkit or in
# PyTorch's nvidia-cudnn wheel. Sets LT_CMAKE_ARGS (extra cmake options) and
# LT_FASHION_DIR (the data directory for the recipes).
LT_CMAKE_ARGS=()
LT_FASHION_DIR=/usr/share/datasets/fashion-mnist
[ -d .gpu_bundle/fashion-mnist ] && [ ! -f "$LT_FASHION_DIR/t10k-labels-idx1-ubyte.gz" ] &&
  LT_FASHION_DIR=$PWD/.gpu_bundle/fashion-mnist

# LT_GPU_ENV_BUNDLE=1 uses the bundle even where the packages are installed (to test it).
if { [ "${LT_GPU_ENV_BUNDLE:-0}" = 1 ] || ! pkg-config --exists lua5.4 2>/dev/null; } &&
   [ -f .gpu_bundle/deps.tar.xz ]; then
  P=/tmp/ltdeps
  arch=x86_64-linux-gnu
  mkdir -p "$P"
  # tar -J runs the xz program, which a bare image may lack; Python's tarfile
  # reads .xz itself (PyTorch brings python3).
  if command -v xz >/dev/null 2>&1; then
    tar -C "$P" -xJf .gpu_bundle/deps.tar.xz
  else
    # fully_trusted: the bundle holds one absolute symlink (libz.so, below),
    # which the 'data' filter (Python 3.14's default) refuses.
    python3 -c 'import sys, tarfile as t
kw = {"filter": "fully_trusted"} if hasattr(t, "fully_trusted_filter") else {}
t.open(sys.argv[1]).extractall(sys.argv[2], **kw)' .gpu_bundle/deps.tar.xz "$P"
  fi || echo "gpu_env: could not unpack .gpu_bundle/deps.tar.xz"
  ln -sf lua5.4 "$P/usr/bin/lua"
  # The one absolute symlink: the linker's libz.so points at /lib/.../libz.so.1.
  ln -sf libz.so.1 "$P/usr/lib/$arch/libz.so"
  export PATH="$P/usr/bin:$PATH"
  export LD_LIBRARY_PATH="$P/usr/lib/$arch:$P/usr/lib/$arch/openblas-pthread${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
  export LUA_PATH="$P/usr/share/lua/5.4/?.lua;$P/usr/share/lua/5.4/?/init.lua;;"
  export LUA_CPATH="$P/usr/lib/$arch/lua/5.4/?.so;;"
  export PKG_CONFIG_SYSROOT_DIR="$P"
  export PKG_CONFIG_LIBDIR="$P/usr/lib/$arch/pkgconfig:$P/usr/share/pkgconfig"
  LT_CMAKE_ARGS+=(-DPKG_CONFIG_EXECUTABLE="$P/usr/bin/pkgconf"
    -DCBLAS_INCLUDE_DIR="$P/usr/include/$arch/openblas-pthread"
    -DOPENBLAS_LIBRARY="$P/usr/lib/$arch/openblas-pthread/libopenblas.so"
    -DDNNL_INCLUDE_DIR="$P/usr/include" -DDNNL_LIBRARY="$P/usr/lib/$arch/libdnnl.so"
    -DEDIT_INCLUDE_DIR="$P/usr/include" -DEDIT_LIBRARY="$P/usr/lib/$arch/libedit.so"
    -DZLIB_INCLUDE_DIR="$P/usr/include" -DZLIB_LIBRARY="$P/usr/lib/$arch/libz.so"
    -DBUSTED="$P/usr/bin/busted")
  echo "gpu_env: using the carried Debian packages in $P"
fi

# cuDNN: the toolkit's if it has one, else the wheel PyTorch uses.
if [ ! -f /usr/local/cuda/include/cudnn.h ] && ! ls /usr/include/cudnn.h >/dev/null 2>&1; then
  cudnn=$(python3 -c 'import nvidia.cudnn as m, os; print(list(m.__path__)[0])' 2>/dev/null || true)
  if [ -n "$cudnn" ] && [ -f "$cudnn/include/cudnn.h" ]; then
    lib=$(ls "$cudnn"/lib/libcudnn.so* 2>/dev/null | sort | head -n 1)
    LT_CMAKE_ARGS+=(-DCUDNN_INCLUDE_DIR="$cudnn/include" -DCUDNN_LIBRARY="$lib")
    export LD_LIBRARY_PATH="$cudnn/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
    echo "gpu_env: cuDNN from $cudnn"
  fi
fi

# NCCL (lt.distributed's nccl backend): the toolkit's if it has one, else the
# wheel PyTorch uses. The build needs its header; lt opens libnccl.so.2 when
# a group starts, through the loader's path.
if [ ! -f /usr/local/cuda/include/nccl.h ] && ! ls /usr/include/nccl.h >/dev/null 2>&1; then
  nccl=$(python3 -c 'import nvidia.nccl as m; print(list(m.__path__)[0])' 2>/dev/null || true)
  if [ -n "$nccl" ] && [ -f "$nccl/include/nccl.h" ]; then
    LT_CMAKE_ARGS+=(-DNCCL_INCLUDE_DIR="$nccl/include")
    export LD_LIBRARY_PATH="$nccl/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
    echo "gpu_env: NCCL from $nccl"
  fi
fi
