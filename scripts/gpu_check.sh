#!/usr/bin/env bash
# One command for a machine with an NVIDIA GPU (CUDA toolkit with cuBLAS and
# cuDNN; PyTorch with CUDA for the timing part): build with the CUDA backend,
# run the whole suite, compare every op on CUDA with the CPU backend, run
# lt.distributed's nccl backend (every collective, then DDP) at world size 1, train
# both Fashion recipes for a few hundred steps on the GPU and time the
# training steps against PyTorch. Parts that need features lt does not have
# yet print "skipped: <reason>" instead of failing. Each part has its own time
# limit so the whole run stays under 6 minutes.
#   scripts/gpu_check.sh [BUILD_DIR]      (default build-gpu)
# On the device machine, which has no Debian packages and no network, carry
# .gpu_bundle (made here by scripts/gpu_bundle.sh); scripts/gpu_env.sh unpacks
# it when the packages are missing and finds cuDNN.
set -uo pipefail
cd "$(dirname "$0")/.."
source scripts/gpu_env.sh
build=${1:-build-gpu}
lt=$build/lt
status=0
section() { printf '\n== %s ==\n' "$1"; }
fail() { echo "FAILED: $1"; status=1; }

section "build (LT_CUDA=ON)"
echo "nvcc: $(command -v nvcc || echo none) $(nvcc --version 2>/dev/null | tail -n 1)"
if ! timeout 240 cmake -S . -B "$build" -DLT_CUDA=ON -DCMAKE_BUILD_TYPE=Release ${LT_CMAKE_ARGS[@]+"${LT_CMAKE_ARGS[@]}"} \
       >/tmp/lt_configure.log 2>&1; then
  tail -n 25 /tmp/lt_configure.log
  echo "FAILED: cmake configure"
  exit 1
fi
if ! timeout 300 cmake --build "$build" -j"$(nproc)" >/tmp/lt_build.log 2>&1; then
  grep -m 20 -E "error|Error" /tmp/lt_build.log
  echo "FAILED: the CUDA build"
  exit 1
fi
"$lt" -e 'print(("lt: CUDA compiled, %d device(s) available"):format(lt.cuda.device_count()))'
if ! "$lt" -e 'os.exit(lt.cuda.is_available() and 0 or 1)'; then
  echo "no CUDA device visible to lt: nothing below would run on a GPU"
  exit 1
fi

section "test suite (ctest)"
# The REPL test needs tmux and the memory report test chromium, which the
# GPU machine has not; neither touches the device.
timeout 150 ctest --test-dir "$build" -j"$(nproc)" --output-on-failure \
  -E 'host/test_repl|host/test_memory_report' | tail -n 15 || fail "ctest"

section "CUDA against CPU, op by op"
# Every row goes to the log that comes back; the screen shows the failures
# (up to 60) and the count.
log=${OUT:-/tmp}/compare_backends.log
timeout 90 "$lt" tests/gpu/compare_backends.lua >"$log" 2>&1 || fail "compare_backends.lua"
grep -m 60 -E "FAIL|rror|not covered:" "$log"; tail -n 2 "$log"

section "CUDA against CPU on a side stream"
timeout 90 "$lt" tests/gpu/compare_backends.lua side-stream | tail -n 3 || fail "compare_backends.lua side-stream"

# lt.distributed's nccl backend on this GPU in a world of one (no mpirun: a
# build without Open MPI starts a world of one by itself, one with it is an
# MPI singleton): every collective, dtype and op, the work handles, destroy
# and init again, then DDP. NCCL is opened when the group starts; where the
# machine has no libnccl the part is skipped with the loader's reason.
section "NCCL collectives (world size 1)"
probe=$(timeout 30 "$lt" -e 'lt.distributed.init_process_group({backend = "nccl"})
  lt.distributed.destroy_process_group()' 2>&1)
if [ $? -ne 0 ]; then
  case "$probe" in
    *"cannot load"*|*"has no NCCL"*) echo "skipped: $(printf '%s' "$probe" | grep -m1 -v '^\s*$')" ;;
    *) printf '%s\n' "$probe" | head -n 5; fail "starting a group with backend nccl" ;;
  esac
else
  nccl_log=${OUT:-/tmp}/nccl_check.log
  timeout 60 "$lt" tests/host/distributed/check.lua collectives nccl >"$nccl_log" 2>&1
  grep -m 20 FAIL "$nccl_log"
  grep -q "^ok collectives rank 0" "$nccl_log" && tail -n 1 "$nccl_log" || fail "NCCL collectives"
  ddp_out=$(timeout 60 "$lt" tests/host/distributed/ddp_cuda.lua 2>&1)
  if grep -q "^ok ddp_cuda rank 0" <<<"$ddp_out"; then
    echo "DDP over nccl: ok"
  else
    printf '%s\n' "$ddp_out" | tail -n 5
    fail "DDP over nccl"
  fi
fi

# A one-step probe first: if training on CUDA fails outright, say why once
# instead of failing every part below.
section "Fashion recipes on CUDA"
probe=$("$lt" -e '
  local m = lt.nn.Linear(4, 2):to("cuda")
  local loss = lt.nn.CrossEntropyLoss()(m(lt.randn(3, 4):cuda()), lt.tensor({1, 2, 1}):cuda())
  loss:backward()
  lt.optim.SGD(m:parameters(), {lr = 0.1}):step()' 2>&1)
nn_ok=$?
if [ $nn_ok -ne 0 ]; then
  echo "skipped: training on CUDA needs the nn/optim CUDA kernels: $(printf '%s' "$probe" | grep -m1 -v '^\s*$')"
else
  for recipe in train_fashion_mlp train_fashion_cnn; do
    # 300 steps: two epochs over the first 19200 images at batch 128 (the
    # carried data set holds those only).
    echo "-- $recipe (300 steps)"
    timeout 90 "$lt" --device cuda "scripts/$recipe.lua" --epochs 2 --limit 19200 --data "$LT_FASHION_DIR" |
      tail -n 2 ||
      fail "$recipe on cuda"
  done
fi

section "training step: lt against PyTorch on the GPU"
if [ $nn_ok -ne 0 ]; then
  echo "skipped: needs training on CUDA (see above)"
elif ! python3 -c 'import torch, sys; sys.exit(0 if torch.cuda.is_available() else 1)' 2>/dev/null; then
  echo "skipped: PyTorch with CUDA is not installed here"
else
  printf '%-5s %5s %9s %9s %6s %11s %11s %11s %11s\n' model batch "lt ms" "torch ms" ratio \
    "lt peak MiB" "pt peak MiB" "lt proc MiB" "pt proc MiB"
  for model in mlp cnn; do
    # lt: model batch threads ms rss_mib peak_allocated_mib device_used_mib
    lt_line=$(timeout 60 "$lt" scripts/bench/step.lua "$model" 128 1 50 cuda)
    # torch: ms max_memory_allocated_mib device_used_mib (mem_get_info)
    pt_line=$(timeout 60 python3 - "$model" <<'PY'
import sys, time, torch
from torch import nn
torch.manual_seed(0)
dev = "cuda"
if sys.argv[1] == "mlp":
    m = nn.Sequential(nn.Flatten(), nn.Linear(784, 256), nn.ReLU(), nn.Linear(256, 128), nn.ReLU(), nn.Linear(128, 10))
    opt = lambda p: torch.optim.SGD(p, lr=0.01, momentum=0.9)
else:
    m = nn.Sequential(nn.Conv2d(1, 32, 3, padding=1), nn.BatchNorm2d(32), nn.ReLU(), nn.MaxPool2d(2),
                      nn.Conv2d(32, 64, 3, padding=1), nn.BatchNorm2d(64), nn.ReLU(), nn.MaxPool2d(2),
                      nn.Flatten(), nn.Linear(3136, 128), nn.ReLU(), nn.Linear(128, 10))
    opt = lambda p: torch.optim.Adam(p, lr=1e-3)
m = m.to(dev); o = opt(m.parameters()); f = nn.CrossEntropyLoss()
x = torch.randn(128, 1, 28, 28, device=dev); y = torch.randint(0, 10, (128,), device=dev)
def step():
    o.zero_grad(set_to_none=True); f(m(x), y).backward(); o.step()
for _ in range(3): step()
torch.cuda.synchronize(); torch.cuda.reset_peak_memory_stats(); best = float("inf")
for _ in range(50):
    t0 = time.perf_counter(); step(); torch.cuda.synchronize(); best = min(best, time.perf_counter() - t0)
free, total = torch.cuda.mem_get_info()
print(f"{best * 1e3:.3f} {torch.cuda.max_memory_allocated() / 2**20:.1f} {(total - free) / 2**20:.1f}")
PY
)
    if [ -n "$lt_line" ] && [ -n "$pt_line" ]; then
      echo "$lt_line $pt_line" | awk '{ printf "%-5s %5d %9.3f %9.3f %6.2f %11.1f %11.1f %11.1f %11.1f\n",
        $1, $2, $4, $8, $4 / $8, $6, $9, $7, $10 }'
    else
      fail "timing $model (lt: '${lt_line}', torch: '${pt_line}')"
    fi
  done
fi

section "result"
[ $status -eq 0 ] && echo "gpu_check: all parts passed or were skipped with a reason" || echo "gpu_check: FAILED parts above"
exit $status
