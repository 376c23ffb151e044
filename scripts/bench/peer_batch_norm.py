#!/usr/bin/env python3
"""The peer of `crema bench batch-norm`: PyTorch's F.batch_norm (training), alone, + ReLU and
+ add + ReLU, on channels_last CUDA tensors of the same shapes, forward and backward timed apart
with CUDA events (cuda_timing.median_ms), in crema's table columns.

  python3 scripts/bench/peer_batch_norm.py [--shape 128,256,56,56]... [--dtype bf16|f32]
                                           [--warmup 5] [--repeats 30]

forward: y = bn(x) / relu(bn(x)) / relu(bn(x) + r) with batch statistics (x, r require grad);
backward: the gradients of x, weight, bias (and r) from one forward's graph (retain_graph), the
forward not timed. Bytes, the fewest a pass must move, T the tensor's bytes (crema's count):
forward 3T, 4T with r; backward 5T, 7T with r. %peak is of the copy bandwidth measured first
(a 1 GB device-to-device copy, read + write). Inputs rotate through copies of ~200 MB of traffic
so that no pass finds them in L2, as crema bench does."""
import argparse
import math
import sys

import torch
import torch.nn.functional as F

from cuda_timing import median_ms

DEFAULT_SHAPES = ["128,64,56,56", "128,256,56,56", "128,128,28,28", "128,512,28,28",
                  "128,256,14,14", "128,1024,14,14", "128,512,7,7", "128,2048,7,7"]
DTYPES = {"bf16": torch.bfloat16, "f32": torch.float32}
FORMS = ("bn", "relu", "add_relu")


def parse(text):
    fields = text.split(",")
    if len(fields) != 4 or not all(f.isdigit() and int(f) > 0 for f in fields):
        sys.exit(f"--shape '{text}': a batch norm shape is N,C,H,W (e.g. 128,256,56,56)")
    return [int(f) for f in fields]


def copy_gbps():
    n = 1 << 28
    src = torch.zeros(n, device="cuda")
    dst = torch.empty_like(src)
    return 2 * n * 4 / median_ms(lambda: dst.copy_(src), 3, 20) / 1e6


def forward(form, x, r, weight, bias):
    y = F.batch_norm(x, None, None, weight, bias, training=True, momentum=0.1, eps=1e-5)
    if form == "relu":
        return F.relu(y)
    if form == "add_relu":
        return F.relu(y + r)
    return y


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--shape", action="append", default=[])
    ap.add_argument("--dtype", choices=sorted(DTYPES), default="bf16")
    ap.add_argument("--warmup", type=int, default=5)
    ap.add_argument("--repeats", type=int, default=30)
    args = ap.parse_args()
    dtype = DTYPES[args.dtype]
    torch.manual_seed(0)
    peak = copy_gbps()
    print(f"peer: {torch.cuda.get_device_name(0)}, torch {torch.__version__}, "
          f"cuDNN {torch.backends.cudnn.version()}; copy bandwidth {peak:.0f} GB/s "
          f"(the %peak column is of it); x channels_last {args.dtype}")
    print(f"{'shape':32s} {'pass':15s} {'version':18s} {'ms':>10s} {'GB/s':>8s} {'%peak':>6s}")
    for text in args.shape or DEFAULT_SHAPES:
        shape = parse(text)
        tensor = math.prod(shape) * torch.finfo(dtype).bits // 8
        copies = max(1, math.ceil(200e6 / (3 * tensor)))

        def activation():
            t = torch.randn(shape, device="cuda", dtype=dtype)
            return t.to(memory_format=torch.channels_last).requires_grad_()

        xs = [activation() for _ in range(copies)]
        rs = [activation() for _ in range(copies)]
        dys = [torch.randn(shape, device="cuda", dtype=dtype)
               .to(memory_format=torch.channels_last) for _ in range(copies)]
        weight = torch.rand(shape[1], device="cuda", requires_grad=True)
        bias = torch.rand(shape[1], device="cuda", requires_grad=True)
        for form in FORMS:
            add = form == "add_relu"
            turn = [0]

            def fwd():
                k = turn[0] % copies
                turn[0] += 1
                return forward(form, xs[k], rs[k], weight, bias)

            outs = [forward(form, xs[k], rs[k], weight, bias) for k in range(copies)]

            def bwd():
                k = turn[0] % copies
                turn[0] += 1
                wanted = [xs[k], weight, bias] + ([rs[k]] if add else [])
                return torch.autograd.grad(outs[k], wanted, dys[k], retain_graph=True)

            for name, fn, moved in (("fwd", fwd, 4 if add else 3), ("bwd", bwd, 7 if add else 5)):
                ms = median_ms(fn, args.warmup, args.repeats)
                gbps = moved * tensor / ms / 1e6
                print(f"{text + ' ' + args.dtype + ' nhwc':32s} {form + '_' + name:15s} "
                      f"{'torch':18s} {ms:10.4f} {gbps:8.1f} {100 * gbps / peak:6.1f}",
                      flush=True)
            del outs


if __name__ == "__main__":
    main()
