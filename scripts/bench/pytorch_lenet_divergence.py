"""How far two fp32 trainings of the same LeNet drift apart when they round differently.

PyTorch trains Caffe's LeNet recipe (SGD lr 0.01, momentum 0.9, weight decay 5e-4, inv policy,
batch 64) on the first 6,400 Fashion-MNIST images for 100 iterations, from one initialization:
  base     on the CPU,
  ulp      on the CPU with ONE weight of conv1 moved by one ulp before the first step,
  cuda     on the GPU (cuDNN deterministic), when there is one.
It prints the largest relative loss difference to `base` so far, every 10 iterations, and the
first iteration where it exceeds 1e-3. Training at this learning rate amplifies any rounding
difference exponentially, so this is the yardstick for crema's CPU-vs-GPU loss comparison.

usage: pytorch_lenet_divergence.py DATA_DIR
"""
import gzip
import sys

import torch
import torch.nn as nn
import torch.nn.functional as F


def read_idx(path):
    data = gzip.open(path).read()
    ndim = data[3]
    dims = [int.from_bytes(data[4 + 4 * i:8 + 4 * i], "big") for i in range(ndim)]
    return torch.frombuffer(bytearray(data[4 + 4 * ndim:]), dtype=torch.uint8).reshape(dims)


class LeNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(1, 20, 5)
        self.conv2 = nn.Conv2d(20, 50, 5)
        self.ip1 = nn.Linear(800, 500)
        self.ip2 = nn.Linear(500, 10)

    def forward(self, x):
        x = F.max_pool2d(self.conv1(x), 2)
        x = F.max_pool2d(self.conv2(x), 2)
        return self.ip2(F.relu(self.ip1(x.flatten(1))))


def train(images, labels, device, perturb):
    torch.manual_seed(1)
    model = LeNet()
    for p in model.parameters():
        nn.init.xavier_uniform_(p) if p.dim() > 1 else nn.init.zeros_(p)
    if perturb:
        with torch.no_grad():
            w = model.conv1.weight.view(-1)
            w[0] = torch.nextafter(w[0], torch.tensor(1.0))
    model = model.to(device)
    opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9, weight_decay=5e-4)
    losses = []
    for it in range(100):
        for group in opt.param_groups:
            group["lr"] = 0.01 * (1 + 1e-4 * it) ** -0.75
        x = images[it * 64:(it + 1) * 64].unsqueeze(1).to(device)
        y = labels[it * 64:(it + 1) * 64].to(device)
        loss = F.cross_entropy(model(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.item())
    return torch.tensor(losses, dtype=torch.float64)


def main():
    data = sys.argv[1]
    images = read_idx(f"{data}/train-images-idx3-ubyte.gz")[:6400].float() / 256
    labels = read_idx(f"{data}/train-labels-idx1-ubyte.gz")[:6400].long()
    torch.backends.cudnn.deterministic = True
    torch.backends.cudnn.benchmark = False
    base = train(images, labels, "cpu", False)
    runs = {"ulp": train(images, labels, "cpu", True)}
    if torch.cuda.is_available():
        runs["cuda"] = train(images, labels, "cuda", False)
    for name, losses in runs.items():
        diff = (losses - base).abs() / base.abs()
        worst = [f"{float(diff[:i + 1].max()):.1e}" for i in range(9, 100, 10)]
        above = torch.nonzero(diff > 1e-3)
        first = int(above[0]) if len(above) else None
        print(f"pytorch {name:>4} vs cpu: largest relative difference by iteration 10,20,..,100: "
              f"{' '.join(worst)}; first above 1e-3: {first}")


if __name__ == "__main__":
    main()
