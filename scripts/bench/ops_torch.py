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


def gpt_parameters():
    """The GPT's 29 parameter tensors, as ops.lua's, each with a gradient."""
    block = [(128,), (128,), (384, 128), (384,), (128, 128), (128,), (128,), (128,),
             (512, 128), (512,), (128, 512), (128,)]
    shapes = [(76, 128), (64, 128)] + block * 2 + [(128,), (128,), (76, 128)]
    params = []
    for s in shapes:
        p = torch.randn(s, requires_grad=True)
        p.grad = torch.randn(s)
        params.append(p)
    return params


params = gpt_parameters() if name == "clip_grad_norm" else None


def gelu_fwd_bwd():
    leaf = x.detach().requires_grad_(True)
    F.gelu(leaf).sum().backward()


def layer_norm_fwd_bwd():
    leaf = ln_x.detach().requires_grad_(True)
    w, b = ln_w.detach().requires_grad_(True), ln_b.detach().requires_grad_(True)
    F.layer_norm(leaf, (128,), w, b).sum().backward()


def cross_entropy_fwd_bwd():
    F.cross_entropy(logits.detach().requires_grad_(True), labels).backward()


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
    "layer_norm_fwd_bwd": layer_norm_fwd_bwd,
    "cross_entropy_fwd_bwd": cross_entropy_fwd_bwd,
    "clip_grad_norm": lambda: torch.nn.utils.clip_grad_norm_(params, 1.0),
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
