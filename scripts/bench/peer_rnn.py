#!/usr/bin/env python3
"""The peer of `crema bench rnn`: the same shapes through torch.nn.RNN/LSTM/GRU on cuDNN, timed
as /work/shared/bench/peer_cudnn.py times them (median of CUDA-event spans), with cuDNN's TF32
off and on, in lines to put beside crema's rows.

  python3 scripts/bench/peer_rnn.py [--shape lstm:T50,N64,C512,H512[,L2][,bi]]... [--repeats 30]

forward is the training forward (the input requires grad, so cuDNN fills its reserve);
forward+backward runs it and the gradients of the input and of every parameter. FLOPs as
peer_cudnn.py counts them: 2*T*N*(C_l + H)*G*H per pass forward, 3x for forward + backward."""
import argparse
import sys

import torch
import torch.nn as nn

from cuda_timing import median_ms

DEFAULT_SHAPES = ["lstm:T50,N64,C512,H512", "gru:T50,N64,C512,H512", "lstm:T28,N256,C28,H128"]
GATES = {"rnn_tanh": 1, "rnn_relu": 1, "lstm": 4, "gru": 3}


def parse(text):
    cell, _, fields = text.partition(":")
    if cell not in GATES:
        sys.exit(f"--shape {text}: unknown cell '{cell}' (rnn_tanh, rnn_relu, lstm, gru)")
    s = {"cell": cell, "L": 1, "bi": False}
    for f in fields.split(","):
        if f == "bi":
            s["bi"] = True
        elif f[:1] in "TNCHL" and f[1:].isdigit():
            s[f[0]] = int(f[1:])
        else:
            sys.exit(f"--shape {text}: cannot read '{f}'")
    return s


def module(s):
    if s["cell"] in ("rnn_tanh", "rnn_relu"):
        return nn.RNN(s["C"], s["H"], s["L"], nonlinearity=s["cell"][4:], bidirectional=s["bi"])
    return getattr(nn, s["cell"].upper())(s["C"], s["H"], s["L"], bidirectional=s["bi"])


def forward_flops(s):
    D = 2 if s["bi"] else 1
    total = 0
    for l in range(s["L"]):
        c_l = s["C"] if l == 0 else D * s["H"]
        total += 2 * s["T"] * s["N"] * (c_l + s["H"]) * GATES[s["cell"]] * s["H"] * D
    return total


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--shape", action="append", default=[])
    ap.add_argument("--warmup", type=int, default=5)
    ap.add_argument("--repeats", type=int, default=30)
    args = ap.parse_args()
    dev = torch.device("cuda")
    torch.manual_seed(0)
    print(f"peer: {torch.cuda.get_device_name(0)}, torch {torch.__version__}, "
          f"cuDNN {torch.backends.cudnn.version()}")
    for text in args.shape or DEFAULT_SHAPES:
        s = parse(text)
        m = module(s).to(dev)
        x = torch.randn(s["T"], s["N"], s["C"], device=dev, requires_grad=True)
        dy = torch.randn_like(m(x)[0])
        wanted = [x] + list(m.parameters())
        fl = forward_flops(s)
        for tf32 in (False, True):
            torch.backends.cudnn.allow_tf32 = tf32
            torch.backends.cuda.matmul.allow_tf32 = tf32
            fwd = median_ms(lambda: m(x), args.warmup, args.repeats)
            both = median_ms(lambda: torch.autograd.grad(m(x)[0], wanted, dy), args.warmup,
                         args.repeats)
            for name, ms, flops in (("forward", fwd, fl), ("forward+backward", both, 3 * fl)):
                print(f"{text:32s} {name:18s} cudnn tf32={str(tf32):5s} {ms:9.4f} ms "
                      f"{flops / ms / 1e9:7.2f} TFLOP/s", flush=True)


if __name__ == "__main__":
    main()
