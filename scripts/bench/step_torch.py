"""PyTorch's side of the training-step benchmark (scripts/bench/run.sh).

Times one training step (forward, cross-entropy loss, backward, optimizer step)
of the Fashion MLP (784-256-128-10, SGD with momentum) or CNN (two blocks of
conv3x3-BatchNorm-ReLU-maxpool with 32 and 64 channels, 3136-128-10, Adam) on
fixed random data, and prints one line: model batch threads ms_per_step
peak_rss_mib. Run with Debian's python3-torch: /usr/bin/python3.
"""
import resource
import sys
import time

import torch
import torch.nn as nn


def mlp():
    return nn.Sequential(nn.Flatten(), nn.Linear(784, 256), nn.ReLU(),
                         nn.Linear(256, 128), nn.ReLU(), nn.Linear(128, 10))


def cnn():
    return nn.Sequential(
        nn.Conv2d(1, 32, 3, padding=1), nn.BatchNorm2d(32), nn.ReLU(), nn.MaxPool2d(2),
        nn.Conv2d(32, 64, 3, padding=1), nn.BatchNorm2d(64), nn.ReLU(), nn.MaxPool2d(2),
        nn.Flatten(), nn.Linear(3136, 128), nn.ReLU(), nn.Linear(128, 10))


def main():
    model_name, batch, threads, steps = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
    torch.set_num_threads(threads)
    torch.manual_seed(0)
    model = mlp() if model_name == "mlp" else cnn()
    if model_name == "mlp":
        opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    else:
        opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    x = torch.randn(batch, 1, 28, 28)
    y = torch.randint(0, 10, (batch,))
    loss_fn = nn.CrossEntropyLoss()

    def step():
        opt.zero_grad(set_to_none=True)
        loss = loss_fn(model(x), y)
        loss.backward()
        opt.step()
        return loss

    for _ in range(3):  # warm up: first-touch allocations, oneDNN primitive caches
        step()
    best = float("inf")
    for _ in range(steps):
        t0 = time.perf_counter()
        step()
        best = min(best, time.perf_counter() - t0)
    rss_mib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(f"{model_name} {batch} {threads} {best * 1e3:.3f} {rss_mib:.1f}")


if __name__ == "__main__":
    main()
