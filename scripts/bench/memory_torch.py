# PyTorch's side of the peak-memory benchmark (scripts/bench/memory.sh): the
# models, data and optimizers of scripts/bench/eager.lua's steps. PyTorch's CPU
# allocator keeps no statistics, so the figure is its profiler's memory
# timeline: torch.profiler.profile(profile_memory=True, record_shapes=True,
# with_stack=True) around two steps after a warm-up step, exported with
# export_memory_timeline(device="cpu"), and the peak over time of the
# categories summed (parameters, gradients, optimizer state, activations,
# temporaries: every tensor alive at that moment).
# With bf16 as a third argument the forward and loss run under
# torch.autocast("cpu", dtype=torch.bfloat16), the backward outside it.
# Prints one line: model batch peak_mib
#   python3 scripts/bench/memory_torch.py mlp|cnn|block BATCH [bf16]
import json
import math
import os
import sys
import tempfile
import warnings

import torch
import torch.nn as nn
import torch.nn.functional as F

warnings.filterwarnings("ignore")  # export_memory_timeline is deprecated, still the CPU's only timeline


class Block(nn.Module):
    """scripts/bench/eager.lua's pre-norm transformer block."""

    def __init__(self, d):
        super().__init__()
        self.ln1, self.ln2 = nn.LayerNorm(d), nn.LayerNorm(d)
        self.q, self.k, self.v, self.o = (nn.Linear(d, d) for _ in range(4))
        self.up, self.down = nn.Linear(d, 4 * d), nn.Linear(4 * d, d)
        self.scale = 1 / math.sqrt(d)

    def forward(self, x):
        h = self.ln1(x)
        scores = self.q(h).matmul(self.k(h).transpose(1, 2)) * self.scale
        x = x + self.o(F.softmax(scores, -1).matmul(self.v(h)))
        return x + self.down(F.gelu(self.up(self.ln2(x))))


def make(name, batch, amp=False):
    torch.manual_seed(0)
    if name == "mlp":
        model = nn.Sequential(nn.Flatten(), nn.Linear(784, 256), nn.ReLU(), nn.Linear(256, 128), nn.ReLU(),
                              nn.Linear(128, 10))
        opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    elif name == "cnn":
        model = nn.Sequential(
            nn.Conv2d(1, 32, 3, padding=1), nn.BatchNorm2d(32), nn.ReLU(), nn.MaxPool2d(2),
            nn.Conv2d(32, 64, 3, padding=1), nn.BatchNorm2d(64), nn.ReLU(), nn.MaxPool2d(2),
            nn.Flatten(), nn.Linear(3136, 128), nn.ReLU(), nn.Linear(128, 10))
        opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    else:
        model = Block(256)
        opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    if name == "block":
        x = torch.randn(batch // 16 + 1, 64, 256)

        def loss():
            return model(x).pow(2).mean()
    else:
        x, y = torch.randn(batch, 1, 28, 28), torch.randint(0, 10, (batch,))

        def loss():
            return F.cross_entropy(model(x), y)

    def step():
        opt.zero_grad()
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=amp):
            value = loss()
        value.backward()
        opt.step()
    return step


def peak_bytes(name, batch, amp=False):
    """The peak of the second and third steps' memory timeline, in bytes."""
    step = make(name, batch, amp)
    step()  # the optimizer state exists from here on, as in lt's run
    with torch.profiler.profile(profile_memory=True, record_shapes=True, with_stack=True) as prof:
        step()
        step()
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "timeline.json")
        prof.export_memory_timeline(path, device="cpu")
        with open(path) as f:
            _, sizes = json.load(f)
    return int(max(sum(at) for at in sizes))  # sizes[i]: bytes by category at times[i]


def main():
    name, batch = sys.argv[1], int(sys.argv[2])
    amp = len(sys.argv) > 3 and sys.argv[3] == "bf16"
    torch.set_num_threads(1)
    peak = peak_bytes(name, batch, amp)
    print(f"{name} {batch} {peak / 2**20:.4f} {peak}")


if __name__ == "__main__":
    main()
