# PyTorch's twin of scripts/bench/ops.lua: prints "name best_ms".
#   python ops_torch.py NAME REPEATS
import sys, time
import torch
import torch.nn.functional as F

name, repeats = sys.argv[1], int(sys.argv[2]) if len(sys.argv) > 2 else 20
torch.set_num_threads(1)
torch.manual_seed(0)
x = torch.randn(16, 64, 512)
att = torch.randn(16, 4, 64, 64)
mask = torch.ones(64, 64).tril() == 0
logits, labels = torch.randn(1024, 76), torch.randint(0, 76, (1024,))
ln_x, ln_w, ln_b = torch.randn(16, 64, 128), torch.ones(128), torch.zeros(128)


def gelu_fwd_bwd():
    leaf = x.detach().requires_grad_(True)
    F.gelu(leaf).sum().backward()


def softmax_fwd_bwd():
    leaf = att.detach().requires_grad_(True)
    F.softmax(leaf, 3).sum().backward()


ops = {
    "gelu": lambda: F.gelu(x),
    "gelu_fwd_bwd": gelu_fwd_bwd,
    "gelu_tanh": lambda: F.gelu(x, approximate="tanh"),
    "masked_softmax": lambda: F.softmax((att * 0.125).masked_fill(mask, float("-inf")), 3),
    "softmax_fwd_bwd": softmax_fwd_bwd,
    "cross_entropy": lambda: F.cross_entropy(logits, labels),
    "layer_norm": lambda: F.layer_norm(ln_x, (128,), ln_w, ln_b),
    "exp": lambda: x.exp(),
    "tanh": lambda: x.tanh(),
}
fn = ops[name]
for _ in range(3):
    fn()
best = float("inf")
for _ in range(repeats):
    t0 = time.perf_counter()
    fn()
    best = min(best, time.perf_counter() - t0)
print(name, "%.4f" % (best * 1000))
