#!/usr/bin/env python3
"""cuBLAS through torch.matmul at 8192^3 in the four layouts (NN, NT, TN, TT) and three maths:
fp32 (allow_tf32 off: true fp32), tf32 (allow_tf32 on, fp32 tensors) and bf16 (bf16 tensors: cuBLAS
reads bf16 from memory). Timed as `crema bench gemm` times: warm-up, then the median of CUDA-event
timings of one call. A layout's T means the operand is stored transposed (a.t() of a contiguous
tensor), as crema's trans_a / trans_b. Prints one line per (math, layout):
    cuBLAS fp32 8192,8192,8192,NN 21.5 ms 51.1 TFLOP/s
Usage: peer_gemm.py [SIZE] (default 8192)."""
import sys

import torch

from cuda_timing import median_ms


def main():
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 8192
    torch.manual_seed(0)
    print(torch.cuda.get_device_name(0), "torch", torch.__version__, flush=True)
    for math, dtype, tf32 in (("fp32", torch.float32, False), ("tf32", torch.float32, True),
                              ("bf16", torch.bfloat16, True)):
        torch.backends.cuda.matmul.allow_tf32 = tf32
        for layout in ("NN", "NT", "TN", "TT"):
            a = (torch.rand(n, n, device="cuda") - 0.5).to(dtype)
            b = (torch.rand(n, n, device="cuda") - 0.5).to(dtype)
            op_a = a.t() if layout[0] == "T" else a
            op_b = b.t() if layout[1] == "T" else b
            ms = median_ms(lambda: op_a @ op_b)
            print(f"cuBLAS {math} {n},{n},{n},{layout} {ms:.3f} ms {2 * n**3 / ms / 1e9:.1f} TFLOP/s",
                  flush=True)
            del a, b, op_a, op_b


if __name__ == "__main__":
    main()
