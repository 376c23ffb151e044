#!/usr/bin/env python3
"""crema's GEMM beside cuBLAS, interleaved: issue 20's bar (8192^3 with bf16 and fp16 operands,
and tf32, >= 95% of cuBLAS in every layout) measured so that the GPU's power state cannot favour
either side. Each round times, layout by layout, `crema bench gemm` on one shape and then
cuBLAS (torch.matmul in this process, timed as scripts/bench/cuda_timing.py times) on the same
shape, math and layout; the result per cell is the median over the rounds of each side, and
the ratio is cuBLAS's time over crema's (a speed ratio: 100% = as fast).

  python3 scripts/bench/gemm_vs_cublas.py --crema build/bin/crema [--size 8192] [--rounds 3]
      [--math bf16 --math f16 --math tf32]

crema's rows: bf16 / f16 are `gemm_16bit_c16` / `gemm_f16_c16` of `crema bench gemm --math bf16
--version wgmma_in_place` (16-bit operands in memory and a 16-bit C, as cuBLAS reads and
writes them); tf32 is the fastest row of `crema bench gemm --math tf32` (fp32 tensors, C fp32)."""
import argparse
import statistics
import subprocess
import sys

import torch

from cuda_timing import median_ms

LAYOUTS = ("NN", "NT", "TN", "TT")
DTYPES = {"bf16": torch.bfloat16, "f16": torch.float16, "tf32": torch.float32}


def crema_ms(crema, math, shape):
    """{math: ms} of one `crema bench gemm` run on one shape."""
    if math == "tf32":
        command = [crema, "bench", "gemm", "--math", "tf32", "--shape", shape]
    else:
        command = [crema, "bench", "gemm", "--math", "bf16", "--version", "wgmma_in_place",
                   "--shape", shape]
    out = subprocess.run(command, capture_output=True, text=True, timeout=300)
    if out.returncode != 0:
        sys.exit(f"{' '.join(command)} failed:\n{out.stdout[-2000:]}{out.stderr[-2000:]}")
    times = {}
    for line in out.stdout.splitlines():
        cells = line.split()
        if len(cells) < 12 or cells[0] != shape or cells[-1] != "ok":
            continue
        ms = float(cells[6])
        if math == "tf32":
            times["tf32"] = min(times.get("tf32", ms), ms)
        elif cells[2] == "gemm_16bit_c16":
            times["bf16"] = ms
        elif cells[2] == "gemm_f16_c16":
            times["f16"] = ms
    return times


def cublas_ms(math, n, layout):
    torch.backends.cuda.matmul.allow_tf32 = math == "tf32"
    dtype = DTYPES[math]
    a = (torch.rand((n, n), device="cuda") - 0.5).to(dtype)
    b = (torch.rand((n, n), device="cuda") - 0.5).to(dtype)
    op_a = a.t() if layout[0] == "T" else a
    op_b = b.t() if layout[1] == "T" else b
    return median_ms(lambda: op_a @ op_b)


def main():
    parser = argparse.ArgumentParser(usage=__doc__)
    parser.add_argument("--crema", required=True)
    parser.add_argument("--size", type=int, default=8192)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--math", action="append", choices=sorted(DTYPES))
    args = parser.parse_args()
    maths = args.math or ["bf16", "f16", "tf32"]
    n = args.size
    print(torch.cuda.get_device_name(0), "torch", torch.__version__, flush=True)
    crema, cublas = {}, {}
    for r in range(args.rounds):
        for layout in LAYOUTS:
            shape = f"{n},{n},{n},{layout}"
            got = {}
            if any(m in ("bf16", "f16") for m in maths):
                got.update(crema_ms(args.crema, "bf16", shape))
            if "tf32" in maths:
                got.update(crema_ms(args.crema, "tf32", shape))
            for math in maths:
                if math not in got:
                    sys.exit(f"crema bench gemm printed no {math} row for {shape}")
                crema.setdefault((math, layout), []).append(got[math])
                cublas.setdefault((math, layout), []).append(cublas_ms(math, n, layout))
                print(f"round {r + 1} {math} {layout}: crema {got[math]:.4f} ms, cuBLAS "
                      f"{cublas[(math, layout)][-1]:.4f} ms", flush=True)
    print(f"\n{n}^3, median of {args.rounds} interleaved rounds; % = cuBLAS ms / crema ms")
    print(f"{'math':<6} {'layout':<6} {'crema ms':>9} {'cuBLAS ms':>10} {'% of cuBLAS':>12}")
    worst = None
    for math in maths:
        for layout in LAYOUTS:
            c = statistics.median(crema[(math, layout)])
            b = statistics.median(cublas[(math, layout)])
            share = 100 * b / c
            worst = share if worst is None else min(worst, share)
            print(f"{math:<6} {layout:<6} {c:>9.4f} {b:>10.4f} {share:>11.1f}%")
    print(f"lowest: {worst:.1f}% of cuBLAS (issue 20's bar: >= 95% in every layout)")


if __name__ == "__main__":
    main()
