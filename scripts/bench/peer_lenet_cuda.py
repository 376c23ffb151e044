#!/usr/bin/env python3
"""The GPU peer for crema's LeNet benchmark: PyTorch + cuDNN training steps of Caffe's LeNet on
Fashion-MNIST-shaped batches, eager and replayed as a CUDA graph, fp32 strict (no TF32), timed
with CUDA events (median of 50 after warm-up). The method is ../shared/bench/peer_cudnn.py's.
Usage: python3 peer_lenet_cuda.py BATCH [BATCH ...]   (prints one line per batch and mode)"""
import sys
import torch, torch.nn as nn, torch.nn.functional as F

dev = torch.device("cuda")
torch.backends.cudnn.allow_tf32 = False
torch.backends.cuda.matmul.allow_tf32 = False

class LeNet(nn.Module):
    def __init__(s):
        super().__init__(); s.c1 = nn.Conv2d(1, 20, 5); s.c2 = nn.Conv2d(20, 50, 5); s.f1 = nn.Linear(800, 500); s.f2 = nn.Linear(500, 10)
    def forward(s, x):
        x = F.max_pool2d(s.c1(x), 2); x = F.max_pool2d(s.c2(x), 2)
        return s.f2(F.relu(s.f1(x.flatten(1))))

def bench(fn, warm=10, rep=50):
    for _ in range(warm): fn()
    torch.cuda.synchronize()
    ts = []
    for _ in range(rep):
        a = torch.cuda.Event(enable_timing=True); b = torch.cuda.Event(enable_timing=True)
        a.record(); fn(); b.record(); b.synchronize(); ts.append(a.elapsed_time(b))
    return sorted(ts)[len(ts) // 2]

for bsz in [int(b) for b in sys.argv[1:]] or [64, 256]:
    torch.manual_seed(0)
    m = LeNet().to(dev); opt = torch.optim.SGD(m.parameters(), lr=0.01, momentum=0.9, weight_decay=5e-4)
    xb = torch.randn(bsz, 1, 28, 28, device=dev); yb = torch.randint(0, 10, (bsz,), device=dev)
    def step():
        opt.zero_grad(set_to_none=True); F.cross_entropy(m(xb), yb).backward(); opt.step()
    print(f"pytorch eager b{bsz} {bench(step):.4f} ms", flush=True)
    s = torch.cuda.Stream(); s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        for _ in range(3): step()
    torch.cuda.current_stream().wait_stream(s)
    g = torch.cuda.CUDAGraph(); opt.zero_grad(set_to_none=True)
    with torch.cuda.graph(g):
        F.cross_entropy(m(xb), yb).backward(); opt.step()
    print(f"pytorch graph b{bsz} {bench(lambda: g.replay(), warm=5):.4f} ms", flush=True)
