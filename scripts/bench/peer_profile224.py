#!/usr/bin/env python3
"""Where PyTorch's training step goes, by kernel family: the peer's side of `crema time`'s per-layer
table. One step of a torchvision model at 224x224 (forward, cross-entropy, backward, SGD momentum)
in bf16 autocast + channels_last (or tf32 / fp32), profiled with torch.profiler over a few steps
after warm-up; the GPU time of every kernel is summed into families by its name (convolution,
batch norm, elementwise, pooling, optimizer, other) and printed per step.

Usage: peer_profile224.py [--mode bf16_cl|tf32|fp32] [--steps 5] NAME:BATCH   (e.g. resnet50:128)
Needs PyTorch with CUDA and torchvision."""
import argparse
import collections

import torch
import torch.nn.functional as F
import torchvision
from torch.profiler import ProfilerActivity, profile

# First match wins: pooling and batch norm before convolution, whose keys ("nhwc") also name
# the channels-last pooling kernels.
FAMILIES = [("batch norm", ("batch_norm", "bn_", "batchnorm")),
            ("pooling", ("pool",)),
            ("optimizer", ("multi_tensor", "foreach", "sgd")),
            ("convolution", ("conv", "gemm", "xmma", "cutlass", "sm90_", "implicit", "wgrad",
                             "dgrad", "fprop", "nhwc", "winograd", "nvjet")),
            ("elementwise", ("elementwise", "vectorized", "unrolled", "threshold", "add",
                             "copy", "fill", "reduce"))]


def family(name):
    low = name.lower()
    for fam, keys in FAMILIES:
        if any(k in low for k in keys):
            return fam
    return "other"


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--mode", default="bf16_cl")
    p.add_argument("--steps", type=int, default=5)
    p.add_argument("net")
    args = p.parse_args()
    name, batch = args.net.split(":")
    torch.backends.cudnn.benchmark = True
    tf32 = args.mode != "fp32"
    torch.backends.cudnn.allow_tf32 = tf32
    torch.backends.cuda.matmul.allow_tf32 = tf32
    cl = args.mode == "bf16_cl"
    model = getattr(torchvision.models, name)(num_classes=1000).cuda()
    x = torch.randn(int(batch), 3, 224, 224, device="cuda")
    y = torch.randint(0, 1000, (int(batch),), device="cuda")
    if cl:
        model = model.to(memory_format=torch.channels_last)
        x = x.to(memory_format=torch.channels_last)
    opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)

    def step():
        opt.zero_grad(set_to_none=True)
        with torch.autocast("cuda", dtype=torch.bfloat16, enabled=cl):
            loss = F.cross_entropy(model(x), y)
        loss.backward()
        opt.step()

    for _ in range(10):
        step()
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        for _ in range(args.steps):
            step()
        torch.cuda.synchronize()
    per_family = collections.defaultdict(float)
    per_kernel = collections.defaultdict(float)
    for e in prof.events():
        if e.device_type == torch.autograd.DeviceType.CUDA:
            us = e.device_time_total if hasattr(e, "device_time_total") else e.cuda_time_total
            per_family[family(e.name)] += us
            per_kernel[e.name] += us
    total = sum(per_family.values())
    print(f"{name} b{batch} {args.mode}: GPU kernel time per step {total / args.steps / 1e3:.2f} ms")
    for fam, us in sorted(per_family.items(), key=lambda kv: -kv[1]):
        print(f"  {fam:12s} {us / args.steps / 1e3:7.2f} ms")
    print("top kernels (ms per step):")
    for k, us in sorted(per_kernel.items(), key=lambda kv: -kv[1])[:25]:
        print(f"  {us / args.steps / 1e3:7.3f}  {k[:110]}")


if __name__ == "__main__":
    main()
