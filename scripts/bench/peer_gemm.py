#!/usr/bin/env python3
"""cuBLAS through torch.matmul, timed as `crema bench gemm` times: warm-up, then the median of
CUDA-event timings of one call. A layout's T means the operand is stored transposed (a.t() of a
contiguous tensor), as crema's trans_a / trans_b. Maths: fp32 (allow_tf32 off: true fp32), tf32
(allow_tf32 on, fp32 tensors), bf16 (bf16 tensors: cuBLAS reads bf16 from memory and writes a
bf16 C) and f16 (the same on f16 tensors). Prints one line per (math, shape):
    cuBLAS fp32 8192,8192,8192,NN 21.5 ms 51.1 TFLOP/s
Usage:
  peer_gemm.py [SIZE]                     SIZE^3 (default 8192) in the four layouts, every math
  peer_gemm.py --shape S [--shape S]... [--math M]...
      S: M,N,K[,NN|NT|TN|TT] or convnext-t (the list `crema bench gemm --shape convnext-t` runs:
      ConvNeXt-T's MLP GEMMs at batch 64); M: fp32, tf32, bf16, f16 (default bf16)."""
import argparse

import torch

from cuda_timing import median_ms

MATHS = {"fp32": (torch.float32, False), "tf32": (torch.float32, True),
         "bf16": (torch.bfloat16, True), "f16": (torch.float16, True)}


def convnext_t():
    """As apps/bench_shapes.cpp: per stage and linear, forward NT, weight gradient TN, input
    gradient NN."""
    shapes = []
    for stage in range(4):
        c, side = 96 << stage, 56 >> stage
        p = 64 * side * side
        for d_in, d_out in ((c, 4 * c), (4 * c, c)):
            shapes += [(p, d_out, d_in, "NT"), (d_out, d_in, p, "TN"), (p, d_in, d_out, "NN")]
    return shapes


def parse_shape(text):
    if text == "convnext-t":
        return convnext_t()
    parts = text.split(",")
    layout = parts[3] if len(parts) == 4 else "NN"
    return [(int(parts[0]), int(parts[1]), int(parts[2]), layout)]


def time_one(math, m, n, k, layout):
    dtype, tf32 = MATHS[math]
    torch.backends.cuda.matmul.allow_tf32 = tf32
    a = (torch.rand((k, m) if layout[0] == "T" else (m, k), device="cuda") - 0.5).to(dtype)
    b = (torch.rand((n, k) if layout[1] == "T" else (k, n), device="cuda") - 0.5).to(dtype)
    op_a = a.t() if layout[0] == "T" else a
    op_b = b.t() if layout[1] == "T" else b
    ms = median_ms(lambda: op_a @ op_b)
    print(f"cuBLAS {math} {m},{n},{k},{layout} {ms:.3f} ms {2 * m * n * k / ms / 1e9:.1f} TFLOP/s",
          flush=True)


def main():
    parser = argparse.ArgumentParser(usage=__doc__)
    parser.add_argument("size", nargs="?", type=int, default=8192)
    parser.add_argument("--shape", action="append", default=[])
    parser.add_argument("--math", action="append", default=[], choices=sorted(MATHS))
    args = parser.parse_args()
    torch.manual_seed(0)
    print(torch.cuda.get_device_name(0), "torch", torch.__version__, flush=True)
    if args.shape:
        shapes = [s for text in args.shape for s in parse_shape(text)]
        for math in args.math or ["bf16"]:
            for shape in shapes:
                time_one(math, *shape)
        return
    n = args.size
    for math in args.math or ["fp32", "tf32", "bf16"]:
        for layout in ("NN", "NT", "TN", "TT"):
            time_one(math, n, n, n, layout)


if __name__ == "__main__":
    main()
