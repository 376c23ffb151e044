#!/usr/bin/env python3
"""The peer of crema bench's memory-bound ops (layer-norm, global-pool, pooling, softmax, lrn,
activation, eltwise, dropout, concat; op-tensor, reduce-tensor, transform-tensor, scale, cast,
layout, loss, accuracy, optimizer, im2col, lcn in peer_tensor_ops.py): PyTorch's calls on CUDA tensors of the same shapes, timed
with CUDA events (cuda_timing.median_ms), in crema's table columns.

  python3 scripts/bench/peer_memory_bound.py OP [--shape 64,96,56,56]...
      [--dtype bf16|f32] [--layout nhwc|nchw] [--warmup 5] [--repeats 30]

layer-norm: x of N,C,H,W normalized over C with weight and bias, eps 1e-6 (ConvNeXt). Under
--layout nhwc x is the contiguous [N, H, W, C] a ConvNeXt block's LayerNorm reads after its
permute (crema's nhwc [N, C, H, W] holds the same bytes); under nchw it is torchvision's
LayerNorm2d (permute to [N, H, W, C], F.layer_norm, permute back, on a contiguous NCHW x).
forward: y; backward: the gradients of x, weight and bias from one forward's graph
(retain_graph), the forward not timed. Bytes (crema's count, T the tensor's bytes): forward 2T,
backward 3T.
global-pool: y = F.adaptive_avg_pool2d(x, 1) on x channels_last (nhwc) or contiguous (nchw),
forward only: T.
The others (peer_memory_ops.py, crema's byte counts, apps/bench_pooling_ops.cpp and
apps/bench_pointwise_ops.cpp): pooling F.max_pool2d / F.avg_pool2d, 3x3 s2 p1 and 2x2 s2;
softmax F.softmax over C of [N, C] ("N,C" shapes, f32); lrn F.local_response_norm(x, 5, 1e-4,
0.75, 1) (f32 nchw); activation relu, sigmoid, tanh, silu, gelu, gelu_tanh; eltwise a + b (out=)
and a += b; dropout F.dropout p 0.5; concat torch.cat of two parts along C (out=), its backward
the copy of the whole's two slices. Backwards are torch.autograd.grad of one forward's graph
(retain_graph), the forward not timed.
%peak is of the copy bandwidth measured first (a 1 GB device-to-device copy, read + write).
Inputs rotate through copies of ~200 MB of traffic so that no pass finds them in L2, as crema
bench does."""
import argparse
import math
import sys

import torch
import torch.nn.functional as F

from cuda_timing import median_ms
import peer_memory_ops
import peer_tensor_ops

DEFAULT_SHAPES = {
    # ConvNeXt-T's LayerNorms at batch 64
    "layer-norm": ["64,96,56,56", "64,192,28,28", "64,384,14,14", "64,768,7,7"],
    # EfficientNet-B0's squeeze-excitation inputs at batch 64
    "global-pool": ["64,32,112,112", "64,96,56,56", "64,144,56,56", "64,240,28,28",
                    "64,480,14,14", "64,1152,7,7"],
}
DEFAULT_SHAPES.update(peer_memory_ops.DEFAULT_SHAPES)
DEFAULT_SHAPES.update(peer_tensor_ops.DEFAULT_SHAPES)
DTYPES = {"bf16": torch.bfloat16, "f32": torch.float32}


def parse(text, extents=4):
    fields = text.split(",")
    if len(fields) != extents or not all(f.isdigit() and int(f) > 0 for f in fields):
        example = "4096,1000" if extents == 2 else "64,96,56,56"
        sys.exit(f"--shape '{text}': a shape is {'N,C' if extents == 2 else 'N,C,H,W'} "
                 f"(e.g. {example})")
    return [int(f) for f in fields]


def copy_gbps():
    n = 1 << 28
    src = torch.zeros(n, device="cuda")
    dst = torch.empty_like(src)
    return 2 * n * 4 / median_ms(lambda: dst.copy_(src), 3, 20) / 1e6


def layer_norm(x, weight, bias, layout):
    if layout == "nhwc":  # x is [N, H, W, C]
        return F.layer_norm(x, (x.shape[-1],), weight, bias, 1e-6)
    y = F.layer_norm(x.permute(0, 2, 3, 1), (x.shape[1],), weight, bias, 1e-6)
    return y.permute(0, 3, 1, 2)


def runs_in(args):
    """The dtype and layout the op's rows run in, as their labels say: --dtype and --layout only
    where the op takes them (peer_tensor_ops' ops are f32, as crema's calls; softmax f32, lrn
    f32 nchw; activation, eltwise, dropout, concat have no layout)."""
    if args.op in peer_tensor_ops.DEFAULT_SHAPES:
        return "f32"
    if args.op in peer_memory_ops.DEFAULT_SHAPES:
        dtype, layout = peer_memory_ops.dtype_and_layout(args.op, DTYPES[args.dtype], args.layout)
        return " ".join(p for p in ("f32" if dtype == torch.float32 else "bf16", layout) if p)
    return f"{args.dtype} {args.layout}"  # layer-norm, global-pool: both


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("op", choices=sorted(DEFAULT_SHAPES))
    ap.add_argument("--shape", action="append", default=[])
    ap.add_argument("--dtype", choices=sorted(DTYPES), default="bf16")
    ap.add_argument("--layout", choices=("nhwc", "nchw"), default="nhwc")
    ap.add_argument("--warmup", type=int, default=5)
    ap.add_argument("--repeats", type=int, default=30)
    args = ap.parse_args()
    dtype = DTYPES[args.dtype]
    torch.manual_seed(0)
    peak = copy_gbps()
    print(f"peer: {torch.cuda.get_device_name(0)}, torch {torch.__version__}; copy bandwidth "
          f"{peak:.0f} GB/s (the %peak column is of it); {args.op} {runs_in(args)}")
    pass_width = 6 if args.op in ("layer-norm", "global-pool") else 15
    print(f"{'shape':32s} {'pass':{pass_width}s} {'version':10s} {'ms':>10s} {'GB/s':>8s} "
          f"{'%peak':>6s}")
    for text in args.shape or DEFAULT_SHAPES[args.op]:
        if args.op in peer_tensor_ops.DEFAULT_SHAPES:  # f32 only; optimizer has no shape
            dims = None if args.op == "optimizer" else parse(text)
            peer_tensor_ops.bench(args.op, text, dims, args, peak)
            continue
        if args.op in peer_memory_ops.DEFAULT_SHAPES:
            dims = parse(text, 2 if args.op == "softmax" else 4)
            peer_memory_ops.bench(args.op, text, dims, dtype, args, peak)
            continue
        n, c, h, w = parse(text)
        tensor = n * c * h * w * torch.finfo(dtype).bits // 8
        copies = max(1, math.ceil(200e6 / (3 * tensor)))
        turn = [0]

        def rotate():
            k = turn[0] % copies
            turn[0] += 1
            return k

        def row(name, ms, moved):
            gbps = moved * tensor / ms / 1e6
            print(f"{text + ' ' + args.dtype + ' ' + args.layout:32s} {name:6s} {'torch':10s} "
                  f"{ms:10.4f} {gbps:8.1f} {100 * gbps / peak:6.1f}", flush=True)

        if args.op == "global-pool":
            fmt = torch.channels_last if args.layout == "nhwc" else torch.contiguous_format
            xs = [torch.rand(n, c, h, w, device="cuda", dtype=dtype).to(memory_format=fmt)
                  for _ in range(copies)]
            row("fwd", median_ms(lambda: F.adaptive_avg_pool2d(xs[rotate()], 1), args.warmup,
                                 args.repeats), 1)
            continue
        shape = [n, h, w, c] if args.layout == "nhwc" else [n, c, h, w]
        xs = [torch.randn(shape, device="cuda", dtype=dtype).requires_grad_() for _ in range(copies)]
        dys = [torch.randn(shape, device="cuda", dtype=dtype) for _ in range(copies)]
        weight = torch.rand(c, device="cuda", dtype=dtype, requires_grad=True)
        bias = torch.rand(c, device="cuda", dtype=dtype, requires_grad=True)
        row("fwd", median_ms(lambda: layer_norm(xs[rotate()], weight, bias, args.layout),
                             args.warmup, args.repeats), 2)
        outs = [layer_norm(xs[k], weight, bias, args.layout) for k in range(copies)]

        def bwd():
            k = rotate()
            return torch.autograd.grad(outs[k], [xs[k], weight, bias], dys[k], retain_graph=True)

        row("bwd", median_ms(bwd, args.warmup, args.repeats), 3)
        del outs


if __name__ == "__main__":
    main()
