#!/usr/bin/env python3
"""cuDNN on bf16 and fp16 channels_last tensors, through PyTorch: the peer of `crema bench conv-tc`
(kernels/convolution/convolution_tc.h). The same shapes in the same order: the six convolutions of
peer_cudnn.py, then ResNet-50's distinct convolutions at batch 128; forward, backward data
(dgrad) and backward filter (wgrad), timed as peer_cudnn.py times them (CUDA events, median of 30
after 5 warm-up calls, cudnn.benchmark on). `tf32`: fp32 channels_last tensors with TF32 allowed
(torch.backends.cudnn.allow_tf32 and torch.backends.cuda.matmul.allow_tf32), the peer of
`crema bench conv-tc --math tf32`.
Usage: python3 scripts/bench/peer_conv_tc.py [bf16|fp16|tf32]... [--match TEXT]
       (default: bf16 and fp16; --match keeps the shapes whose name contains TEXT, e.g. "1x1" for
       the pointwise layers that crema runs on wgmma; needs PyTorch with CUDA)"""
import sys
import torch
import torch.nn.functional as F

from cuda_timing import median_ms

dev = torch.device("cuda")
torch.manual_seed(0)
# name, N, C, H, K, R, stride, pad (square images and filters)
convs = [("resnet 3x3 64->64 56x56 n64", 64, 64, 56, 64, 3, 1, 1),
         ("resnet 3x3 128->128 28x28 n64", 64, 128, 28, 128, 3, 1, 1),
         ("resnet 3x3 256->256 14x14 n64", 64, 256, 14, 256, 3, 1, 1),
         ("resnet 1x1 256->64 56x56 n64", 64, 256, 56, 64, 1, 1, 0),
         ("resnet 7x7s2 3->64 224x224 n64", 64, 3, 224, 64, 7, 2, 3),
         ("lenet 5x5 20->50 12x12 n256", 256, 20, 12, 50, 5, 1, 0)]
for (nm, C, H, K, R, s, p) in [
        ("stem 7x7s2 3->64 224", 3, 224, 64, 7, 2, 3), ("1x1 64->64 56", 64, 56, 64, 1, 1, 0),
        ("3x3 64->64 56", 64, 56, 64, 3, 1, 1), ("1x1 64->256 56", 64, 56, 256, 1, 1, 0),
        ("1x1 256->64 56", 256, 56, 64, 1, 1, 0), ("1x1 256->128 56", 256, 56, 128, 1, 1, 0),
        ("3x3s2 128->128 56", 128, 56, 128, 3, 2, 1), ("1x1s2 256->512 56", 256, 56, 512, 1, 2, 0),
        ("3x3 128->128 28", 128, 28, 128, 3, 1, 1), ("1x1 128->512 28", 128, 28, 512, 1, 1, 0),
        ("1x1 512->128 28", 512, 28, 128, 1, 1, 0), ("1x1 512->256 28", 512, 28, 256, 1, 1, 0),
        ("3x3s2 256->256 28", 256, 28, 256, 3, 2, 1),
        ("1x1s2 512->1024 28", 512, 28, 1024, 1, 2, 0), ("3x3 256->256 14", 256, 14, 256, 3, 1, 1),
        ("1x1 256->1024 14", 256, 14, 1024, 1, 1, 0), ("1x1 1024->256 14", 1024, 14, 256, 1, 1, 0),
        ("1x1 1024->512 14", 1024, 14, 512, 1, 1, 0), ("3x3s2 512->512 14", 512, 14, 512, 3, 2, 1),
        ("1x1s2 1024->2048 14", 1024, 14, 2048, 1, 2, 0), ("3x3 512->512 7", 512, 7, 512, 3, 1, 1),
        ("1x1 512->2048 7", 512, 7, 2048, 1, 1, 0), ("1x1 2048->512 7", 2048, 7, 512, 1, 1, 0)]:
    convs.append(("r50 " + nm, 128, C, H, K, R, s, p))

print(f"device {torch.cuda.get_device_name(0)}, torch {torch.__version__}, "
      f"cudnn {torch.backends.cudnn.version()}")
torch.backends.cudnn.benchmark = True
args = sys.argv[1:]
match = ""
if "--match" in args:
    at = args.index("--match")
    match = args[at + 1]
    del args[at:at + 2]
dtypes = {"bf16": torch.bfloat16, "fp16": torch.float16, "tf32": torch.float32}
for name in args:
    if name not in dtypes:
        sys.exit(f"peer_conv_tc.py: unknown type '{name}'; choose from bf16, fp16, tf32")
torch.backends.cudnn.allow_tf32 = True  # fp32 tensors (tf32) compute in TF32, as crema's tf32 math
torch.backends.cuda.matmul.allow_tf32 = True
for name in args or ["bf16", "fp16"]:
    dtype = dtypes[name]
    for (nm, N, C, H, K, R, s, p) in convs:
        if match not in nm:
            continue
        cl = torch.channels_last
        xx = torch.randn(N, C, H, H, device=dev, dtype=dtype).to(memory_format=cl)
        ww = torch.randn(K, C, R, R, device=dev, dtype=dtype).to(memory_format=cl)
        yy = F.conv2d(xx, ww, stride=s, padding=p)
        fl = 2 * N * K * yy.shape[2] * yy.shape[3] * C * R * R
        gy = torch.randn_like(yy).contiguous(memory_format=cl)
        args = (gy, xx, ww, None, [s, s], [p, p], [1, 1], False, [0, 0], 1)
        runs = {"fwd": lambda: F.conv2d(xx, ww, stride=s, padding=p),
                "dgrad": lambda: torch.ops.aten.convolution_backward(*args, [True, False, False]),
                "wgrad": lambda: torch.ops.aten.convolution_backward(*args, [False, True, False])}
        for pas, fn in runs.items():
            ms = median_ms(fn)
            print(f"conv {pas} {nm} {name} channels_last {ms:9.4f} ms "
                  f"{fl / ms / 1e9:.1f} TFLOP/s", flush=True)
        del xx, ww, yy, gy
