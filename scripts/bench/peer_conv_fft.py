#!/usr/bin/env python3
"""cuDNN in fp32 (TF32 off, cudnn.benchmark on), through PyTorch, on stride-1 convolutions given
as N,C,H,W,K,R,pP (R x R filters, padding P): the peer of `crema bench conv --shape ...` for the
FFT measurement in kernels/convolution/README.md ("FFT"). Forward, backward data (dgrad) and
backward filter (wgrad), timed as peer_cudnn.py times them (CUDA events, median of 30 after 5
warm-up calls).
Usage: python3 scripts/bench/peer_conv_fft.py 64,128,26,26,128,7,p3 ...   (needs PyTorch with CUDA)"""
import sys
import torch
import torch.nn.functional as F

from cuda_timing import median_ms

dev = torch.device("cuda")
torch.backends.cudnn.allow_tf32 = False
torch.backends.cuda.matmul.allow_tf32 = False
torch.backends.cudnn.benchmark = True


print(torch.cuda.get_device_name(0), torch.__version__, torch.backends.cudnn.version())
for text in sys.argv[1:]:
    N, C, H, W, K, R, p = [int(v.lstrip("p")) for v in text.split(",")]
    x = torch.randn(N, C, H, W, device=dev)
    w = torch.randn(K, C, R, R, device=dev)
    gy = torch.randn_like(F.conv2d(x, w, padding=p))

    def backward(mask):
        return lambda: torch.ops.aten.convolution_backward(
            gy, x, w, None, [1, 1], [p, p], [1, 1], False, [0, 0], 1, mask)

    fwd = median_ms(lambda: F.conv2d(x, w, padding=p))
    dgrad = median_ms(backward([True, False, False]))
    wgrad = median_ms(backward([False, True, False]))
    print(f"peer {text:28s} fwd {fwd:.4f} dgrad {dgrad:.4f} wgrad {wgrad:.4f} ms", flush=True)
