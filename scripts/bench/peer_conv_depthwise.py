#!/usr/bin/env python3
"""PyTorch (cuDNN, or its own depthwise kernels where it picks them) on the depthwise convolutions
of MobileNetV2, EfficientNet-B0 and ConvNeXt-T at batch 64: the peer of crema's `--shape
depthwise` list (apps/bench_shapes.cpp), the same names in the same order. Three precisions:
  fp32     fp32 contiguous (NCHW) tensors    crema bench conv --layout nchw --version depthwise_direct
  fp32_cl  fp32 channels_last tensors        crema bench conv --layout nhwc
  bf16     bf16 channels_last tensors        crema bench conv-tc --math bf16
forward, backward data (dgrad) and backward filter (wgrad), TF32 off, timed as peer_cudnn.py times
them (cuda_timing.py: CUDA events, median of 30 after 5 warm-up calls, cudnn.benchmark on). Each
line: "dwconv PASS NAME PRECISION MS ms GB/s" (the fewest bytes a pass moves: x, y (or dy) and w).
With --crema BIN it also runs those crema commands, pairs their rows with its own by shape and
pass and prints per row crema ms, peer ms and crema / peer, then the geometric mean per precision
(issue 20's bar: <= 1.0 in fp32 and bf16).
Usage: python3 scripts/bench/peer_conv_depthwise.py [fp32|fp32_cl|bf16]... [--match TEXT]
       [--crema build/bin/crema]
       (default: all three; --match keeps the shapes whose name contains TEXT, e.g. "7x7";
       needs PyTorch with CUDA)"""
import math
import subprocess
import sys

import torch
import torch.nn.functional as F

from cuda_timing import median_ms

# name, C, H (= W), R (= S), stride; pad R // 2; N = 64. apps/bench_shapes.cpp's kDepthwiseConvs.
convs = [("dw 3x3 c32 112x112 n64", 32, 112, 3, 1),
         ("dw 3x3s2 c96 112x112 n64", 96, 112, 3, 2),
         ("dw 3x3 c144 56x56 n64", 144, 56, 3, 1),
         ("dw 3x3s2 c144 56x56 n64", 144, 56, 3, 2),
         ("dw 3x3 c192 28x28 n64", 192, 28, 3, 1),
         ("dw 3x3s2 c192 28x28 n64", 192, 28, 3, 2),
         ("dw 3x3 c384 14x14 n64", 384, 14, 3, 1),
         ("dw 3x3 c576 14x14 n64", 576, 14, 3, 1),
         ("dw 3x3s2 c576 14x14 n64", 576, 14, 3, 2),
         ("dw 3x3 c960 7x7 n64", 960, 7, 3, 1),
         ("dw 5x5s2 c144 56x56 n64", 144, 56, 5, 2),
         ("dw 5x5 c240 28x28 n64", 240, 28, 5, 1),
         ("dw 3x3s2 c240 28x28 n64", 240, 28, 3, 2),
         ("dw 3x3 c480 14x14 n64", 480, 14, 3, 1),
         ("dw 5x5 c480 14x14 n64", 480, 14, 5, 1),
         ("dw 5x5 c672 14x14 n64", 672, 14, 5, 1),
         ("dw 5x5s2 c672 14x14 n64", 672, 14, 5, 2),
         ("dw 5x5 c1152 7x7 n64", 1152, 7, 5, 1),
         ("dw 3x3 c1152 7x7 n64", 1152, 7, 3, 1),
         ("dw 7x7 c96 56x56 n64", 96, 56, 7, 1),
         ("dw 7x7 c192 28x28 n64", 192, 28, 7, 1),
         ("dw 7x7 c384 14x14 n64", 384, 14, 7, 1),
         ("dw 7x7 c768 7x7 n64", 768, 7, 7, 1)]
N = 64
# precision -> (dtype, memory format, the crema command's arguments before the shapes)
precisions = {
    "fp32": (torch.float32, torch.contiguous_format,
             ["bench", "conv", "--layout", "nchw", "--version", "depthwise_direct"]),
    "fp32_cl": (torch.float32, torch.channels_last, ["bench", "conv", "--layout", "nhwc"]),
    "bf16": (torch.bfloat16, torch.channels_last, ["bench", "conv-tc", "--math", "bf16"]),
}


def option(args, name):
    """The value of `name VALUE` in args (removed from it), or None."""
    if name not in args:
        return None
    at = args.index(name)
    value = args[at + 1]
    del args[at:at + 2]
    return value


def peer_rows(name, shapes):
    """{(shape, pass): ms} of PyTorch for one precision, printing each line."""
    dtype, fmt, _ = precisions[name]
    rows = {}
    for (nm, C, H, R, s) in shapes:
        p = R // 2
        xx = torch.randn(N, C, H, H, device="cuda", dtype=dtype).to(memory_format=fmt)
        ww = torch.randn(C, 1, R, R, device="cuda", dtype=dtype).to(memory_format=fmt)
        yy = F.conv2d(xx, ww, stride=s, padding=p, groups=C)
        gy = torch.randn_like(yy).contiguous(memory_format=fmt)
        moved = (xx.numel() + yy.numel() + ww.numel()) * xx.element_size()
        args = (gy, xx, ww, None, [s, s], [p, p], [1, 1], False, [0, 0], C)
        runs = {"fwd": lambda: F.conv2d(xx, ww, stride=s, padding=p, groups=C),
                "dgrad": lambda: torch.ops.aten.convolution_backward(*args, [True, False, False]),
                "wgrad": lambda: torch.ops.aten.convolution_backward(*args, [False, True, False])}
        for pas, fn in runs.items():
            ms = median_ms(fn)
            rows[(nm, pas)] = ms
            print(f"dwconv {pas} {nm} {name} {ms:9.4f} ms {moved / ms / 1e6:8.1f} GB/s", flush=True)
        del xx, ww, yy, gy
    return rows


def crema_rows(binary, name, shapes):
    """{(shape, pass): ms} of crema's bench for one precision (its table: the shape in the first
    32 columns, then pass, version, check, rel.err, tol, ms, ...; rows that failed have no ms)."""
    command = [binary] + precisions[name][2]
    for (nm, *_) in shapes:
        command += ["--shape", nm]
    done = subprocess.run(command, capture_output=True, text=True)
    sys.stdout.write(done.stdout)
    if done.returncode != 0:
        print(f"crema ({' '.join(command[:4])} ...) exited with {done.returncode}: {done.stderr}")
    rows = {}
    names = {nm for (nm, *_) in shapes}
    for line in done.stdout.splitlines():
        shape, fields = line[:32].rstrip(), line[32:].split()
        if shape in names and len(fields) >= 6 and fields[5] != "-":
            rows[(shape, fields[0])] = float(fields[5])
    return rows


def compare(name, shapes, crema, peer):
    print(f"\n{name}: crema / peer (< 1: crema faster)")
    print(f"{'shape':<28} {'pass':<6} {'crema ms':>10} {'peer ms':>10} {'ratio':>7}")
    logs = []
    for (nm, *_) in shapes:
        for pas in ("fwd", "dgrad", "wgrad"):
            ours, theirs = crema.get((nm, pas)), peer.get((nm, pas))
            if ours is None or theirs is None:
                print(f"{nm:<28} {pas:<6} {'-' if ours is None else f'{ours:.4f}':>10} "
                      f"{'-' if theirs is None else f'{theirs:.4f}':>10} {'-':>7}")
                continue
            logs.append(math.log(ours / theirs))
            print(f"{nm:<28} {pas:<6} {ours:10.4f} {theirs:10.4f} {ours / theirs:7.3f}")
    if logs:
        print(f"{name}: geomean crema / peer {math.exp(sum(logs) / len(logs)):.3f} over "
              f"{len(logs)} rows", flush=True)


def main():
    args = sys.argv[1:]
    match = option(args, "--match") or ""
    binary = option(args, "--crema")
    for name in args:
        if name not in precisions:
            sys.exit(f"peer_conv_depthwise.py: unknown precision '{name}'; choose from "
                     f"{', '.join(precisions)}")
    shapes = [c for c in convs if match in c[0]]
    print(f"device {torch.cuda.get_device_name(0)}, torch {torch.__version__}, "
          f"cudnn {torch.backends.cudnn.version()}")
    torch.manual_seed(0)
    torch.backends.cudnn.benchmark = True
    torch.backends.cudnn.allow_tf32 = False  # fp32 is fp32, as crema's depthwise kernels
    torch.backends.cuda.matmul.allow_tf32 = False
    for name in args or list(precisions):
        peer = peer_rows(name, shapes)
        if binary:
            compare(name, shapes, crema_rows(binary, name, shapes), peer)


if __name__ == "__main__":
    main()
