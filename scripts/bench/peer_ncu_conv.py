#!/usr/bin/env python3
"""cuDNN's convolution kernels under Nsight Compute: for each shape, the three passes warmed up
(cudnn.benchmark picks its algorithm), then one call of each inside an NVTX range "prof", so that
ncu profiles only those. The peer side of an ncu comparison with `crema bench conv-tc` (which
kernels cuDNN runs, their grid, block, shared memory, registers and throughputs).
Usage (on the GPU machine):
  ncu --clock-control none --csv --print-units base --nvtx --nvtx-include "prof/" \\
      --section SpeedOfLight --section LaunchStats python3 scripts/bench/peer_ncu_conv.py [bf16|fp16|tf32]
Shapes: ResNet's 3x3s at 56, 28 and 14 and its 1x1 256->64 at 56, batch 64 (the six shapes')."""
import sys
import torch
import torch.nn.functional as F

dtypes = {"bf16": torch.bfloat16, "fp16": torch.float16, "tf32": torch.float32}
name = sys.argv[1] if len(sys.argv) > 1 else "bf16"
if name not in dtypes:
    sys.exit(f"peer_ncu_conv.py: unknown type '{name}'; choose from bf16, fp16, tf32")
dev = torch.device("cuda")
torch.backends.cudnn.benchmark = True
torch.backends.cudnn.allow_tf32 = True
# N, C, H (square), K, R (square), stride, pad
shapes = [(64, 64, 56, 64, 3, 1, 1), (64, 128, 28, 128, 3, 1, 1), (64, 256, 14, 256, 3, 1, 1),
          (64, 256, 56, 64, 1, 1, 0)]
for (N, C, H, K, R, s, p) in shapes:
    cl = torch.channels_last
    x = torch.randn(N, C, H, H, device=dev, dtype=dtypes[name]).to(memory_format=cl)
    w = torch.randn(K, C, R, R, device=dev, dtype=dtypes[name]).to(memory_format=cl)
    y = F.conv2d(x, w, stride=s, padding=p)
    gy = torch.randn_like(y).contiguous(memory_format=cl)
    args = (gy, x, w, None, [s, s], [p, p], [1, 1], False, [0, 0], 1)
    passes = [lambda: F.conv2d(x, w, stride=s, padding=p),
              lambda: torch.ops.aten.convolution_backward(*args, [True, False, False]),
              lambda: torch.ops.aten.convolution_backward(*args, [False, True, False])]
    for run in passes:
        for _ in range(5):
            run()
    torch.cuda.synchronize()
    for run in passes:
        torch.cuda.nvtx.range_push("prof")
        run()
        torch.cuda.nvtx.range_pop()
    torch.cuda.synchronize()
