#!/usr/bin/env python3
"""cuDNN on channels_last (NHWC) tensors, through PyTorch: the peer of `crema bench conv --layout
nhwc` (crema's raw NHWC passes); and on contiguous (NCHW) tensors, the peer of the NCHW versions,
in the same run. The six convolutions of peer_cudnn.py, forward, backward data (dgrad) and
backward filter (wgrad), TF32 off then on, timed as peer_cudnn.py times them (CUDA events, median
of 30 after 5 warm-up calls, cudnn.benchmark on).
Usage: python3 scripts/bench/peer_conv_nhwc.py [channels_last|contiguous]...
       (default: both; needs PyTorch with CUDA)"""
import sys
import torch
import torch.nn.functional as F

from cuda_timing import median_ms

dev = torch.device("cuda")
torch.manual_seed(0)
convs = [("resnet 3x3 64->64 56x56 n64", 64, 64, 56, 56, 64, 3, 1, 1),
         ("resnet 3x3 128->128 28x28 n64", 64, 128, 28, 28, 128, 3, 1, 1),
         ("resnet 3x3 256->256 14x14 n64", 64, 256, 14, 14, 256, 3, 1, 1),
         ("resnet 1x1 256->64 56x56 n64", 64, 256, 56, 56, 64, 1, 1, 0),
         ("resnet 7x7s2 3->64 224x224 n64", 64, 3, 224, 224, 64, 7, 2, 3),
         ("lenet 5x5 20->50 12x12 n256", 256, 20, 12, 12, 50, 5, 1, 0)]


print(f"device {torch.cuda.get_device_name(0)}, torch {torch.__version__}, "
      f"cudnn {torch.backends.cudnn.version()}")
formats = sys.argv[1:] or ["channels_last", "contiguous"]
for fmt in formats:
    cl = torch.channels_last if fmt == "channels_last" else torch.contiguous_format
    for tf32 in (False, True):
        torch.backends.cudnn.allow_tf32 = tf32
        torch.backends.cudnn.benchmark = True
        for (nm, N, C, H, W, K, R, s, p) in convs:
            xx = torch.randn(N, C, H, W, device=dev).to(memory_format=cl)
            ww = torch.randn(K, C, R, R, device=dev).to(memory_format=cl)
            yy = F.conv2d(xx, ww, stride=s, padding=p)
            fl = 2 * N * K * yy.shape[2] * yy.shape[3] * C * R * R
            gy = torch.randn_like(yy).contiguous(memory_format=cl)
            args = (gy, xx, ww, None, [s, s], [p, p], [1, 1], False, [0, 0], 1)
            runs = {"fwd": lambda: F.conv2d(xx, ww, stride=s, padding=p),
                    "dgrad": lambda: torch.ops.aten.convolution_backward(*args, [True, False, False]),
                    "wgrad": lambda: torch.ops.aten.convolution_backward(*args, [False, True, False])}
            for pas, fn in runs.items():
                ms = median_ms(fn)
                print(f"conv {pas} {nm} tf32={tf32} {fmt} {ms:9.4f} ms "
                      f"{fl / ms / 1e9:.1f} TFLOP/s", flush=True)
