#!/usr/bin/env python3
"""3-D convolution on the GPU, crema against PyTorch + cuDNN, on C3D's conv2 and conv3a.

Runs `crema time scripts/bench/c3d_conv3d.yaml --device cuda:0` (per-layer forward and backward
times of the net there) and times the same two convolutions in PyTorch (cuDNN, fp32 with TF32
off, cudnn.benchmark on; forward, and backward data + weights + bias as one autograd call) with
CUDA events, then prints PyTorch's per-layer times beside crema's output. Issue 18's bar: crema's
3-D convolution within 1.5x cuDNN's on these shapes (compare each conv layer's forward + backward).

  python3 scripts/bench/c3d_conv3d.py --crema build/bin/crema [--iterations 20] [--algorithm find]

crema runs 3-D convolutions on the GPU as depth_col (kernels/convolution/README.md, "N-d"): one
2-D convolution per chunk of images, whose 2-D algorithm the layers' `algorithm:` key chooses --
auto (the heuristic, the default) or find (each measured at the first step); `crema time` names
that 2-D algorithm per pass in its layer table.
"""
import argparse
import os
import subprocess

import torch
import torch.nn.functional as F

HERE = os.path.dirname(os.path.abspath(__file__))
BATCH = 8
LAYERS = (("conv2", (BATCH, 64, 16, 56, 56), 128), ("conv3a", (BATCH, 128, 8, 28, 28), 256))


def time_ms(work, iterations):
    """Mean milliseconds of work() on the GPU after two warm-up calls."""
    for _ in range(2):
        work()
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    torch.cuda.synchronize()
    start.record()
    for _ in range(iterations):
        work()
    end.record()
    torch.cuda.synchronize()
    return start.elapsed_time(end) / iterations


def pytorch_times(iterations):
    torch.backends.cudnn.benchmark = True
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    rows = []
    for name, x_shape, k in LAYERS:
        x = torch.randn(*x_shape, device="cuda", requires_grad=True)
        w = torch.randn(k, x_shape[1], 3, 3, 3, device="cuda", requires_grad=True)
        b = torch.randn(k, device="cuda", requires_grad=True)
        forward = lambda: F.conv3d(x, w, b, padding=1)
        y = forward()
        dy = torch.randn_like(y)
        fwd = time_ms(forward, iterations)
        bwd = time_ms(lambda: torch.autograd.grad(y, (x, w, b), dy, retain_graph=True),
                      iterations)
        flops = 2 * y.numel() * x_shape[1] * 27
        rows.append((name, fwd, bwd, flops))
    return rows


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--crema", default="build/bin/crema")
    parser.add_argument("--iterations", type=int, default=20)
    parser.add_argument("--algorithm", choices=("auto", "find"), default="auto",
                        help="how crema's conv layers choose their 2-D algorithm")
    args = parser.parse_args()
    config = os.path.join(HERE, "c3d_conv3d.yaml")
    command = [args.crema, "time", config, "--device", "cuda:0",
               "--iterations", str(args.iterations)]
    if args.algorithm != "auto":
        for name, _, _ in LAYERS:
            command += ["--set", "+model.layers.%s.algorithm=%s" % (name, args.algorithm)]
    print("$ " + " ".join(command), flush=True)
    subprocess.run(command, check=True)
    print("\nPyTorch %s + cuDNN %s, fp32 (TF32 off), %s:" % (
        torch.__version__, torch.backends.cudnn.version(), torch.cuda.get_device_name()))
    print("%-8s %12s %12s %12s" % ("layer", "forward ms", "backward ms", "fwd TFLOP/s"))
    for name, fwd, bwd, flops in pytorch_times(args.iterations):
        print("%-8s %12.3f %12.3f %12.1f" % (name, fwd, bwd, flops / fwd / 1e9))


if __name__ == "__main__":
    main()
