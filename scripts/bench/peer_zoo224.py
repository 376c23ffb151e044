#!/usr/bin/env python3
"""PyTorch peer for `crema time` on the zoo configs (configs/zoo/): one training step (forward,
cross-entropy, backward, SGD momentum) of a torchvision model at 224x224 on random data, eager.
Prints ms/step, img/s and peak GPU memory per precision mode.

Usage: peer_zoo224.py [--modes fp32,bf16_cl] NAME:BATCH...   (e.g. mobilenet_v2:128)
Modes: fp32 (TF32 off), tf32, bf16_cl (bf16 autocast + channels_last), fp16_cl (fp16 autocast +
channels_last + GradScaler), bf16_cl_compile (bf16_cl under torch.compile; its first steps
compile, outside the timing)."""
import argparse
import time

import torch
import torch.nn.functional as F
import torchvision


def bench(step, warm=10, rep=30):
    for _ in range(warm):
        step()
    torch.cuda.synchronize()
    a, b = torch.cuda.Event(True), torch.cuda.Event(True)
    a.record()
    for _ in range(rep):
        step()
    b.record()
    torch.cuda.synchronize()
    return a.elapsed_time(b) / rep


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--modes", default="fp32,bf16_cl")
    p.add_argument("nets", nargs="+")
    args = p.parse_args()
    print("peer:", torch.cuda.get_device_name(), "torch", torch.__version__, "cudnn",
          torch.backends.cudnn.version(), flush=True)
    torch.backends.cudnn.benchmark = True
    for spec in args.nets:
        name, batch = spec.split(":")
        batch = int(batch)
        for mode in args.modes.split(","):
            tf32 = mode != "fp32"
            torch.backends.cudnn.allow_tf32 = tf32
            torch.backends.cuda.matmul.allow_tf32 = tf32
            torch.manual_seed(0)
            torch.cuda.empty_cache()
            torch.cuda.reset_peak_memory_stats()
            cl = mode.startswith("bf16") or mode.startswith("fp16")
            half = torch.float16 if mode.startswith("fp16") else torch.bfloat16
            scaler = torch.amp.GradScaler("cuda", enabled=half == torch.float16)
            m = getattr(torchvision.models, name)().cuda()
            x = torch.randn(batch, 3, 224, 224, device="cuda")
            y = torch.randint(0, 1000, (batch,), device="cuda")
            if cl:
                m = m.to(memory_format=torch.channels_last)
                x = x.to(memory_format=torch.channels_last)
            opt = torch.optim.SGD(m.parameters(), lr=0.01, momentum=0.9, weight_decay=1e-4)

            forward = torch.compile(m) if mode.endswith("_compile") else m

            def step():
                opt.zero_grad(set_to_none=True)
                with torch.autocast("cuda", half, enabled=cl):
                    loss = F.cross_entropy(forward(x), y)
                scaler.scale(loss).backward()
                scaler.step(opt)
                scaler.update()

            t0 = time.time()
            ms = bench(step)
            print(f"{name} b{batch} {mode:16s} {ms:8.2f} ms/step {batch / ms * 1e3:8.0f} img/s  "
                  f"peak {torch.cuda.max_memory_allocated() / 2**30:6.2f} GiB  ({time.time() - t0:.0f} s)",
                  flush=True)
            del m, forward, opt, x, y


if __name__ == "__main__":
    main()
