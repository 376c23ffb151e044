"""PyTorch's side of crema bench op-tensor | reduce-tensor | transform-tensor | scale | cast |
layout | loss | accuracy | optimizer | im2col | lcn, run by peer_memory_bound.py. Rows name their
shapes and count bytes as crema's tables do (apps/bench_tensor_ops.cpp,
apps/bench_training_ops.cpp: T one f32 tensor's bytes), so the GB/s columns compare call for call.

  op-tensor         torch.add(a, b[1, C, 1, 1], out=c) (2T); torch.mul(a, b, out=c) (3T)
  reduce-tensor     x.sum((2, 3), keepdim=True); torch.linalg.vector_norm(x, inf) (T each)
  transform-tensor  y.copy_(x.permute(0, 2, 3, 1)) (2T)
  scale             torch.addcmul(bias, x, scale, out=y) (2T); the parameter sums (dy * x).sum
                    and dy.sum over N, H, W (2T read)
  cast              y.copy_(x), f32 -> bf16 and back (1.5T)
  layout            y.copy_(x.permute(...)), NCHW -> NHWC and back (2T)
  loss              F.cross_entropy over C, forward and backward (2T + T/C: labels counted as
                    crema's f32 labels)
  accuracy          (x.argmax(1) == labels).float().mean() (T + T/C)
  optimizer         torch.optim.SGD (momentum 0.9, decay 5e-4) and Adam (decay 5e-4), fused where
                    torch has it, on a CIFAR ResNet-18's weights (6 and 8 x 4 bytes a parameter)
  im2col            F.unfold(x, 3, padding=1) (T + 9T)
  lcn               LCN from pools: t = x - avg5(x), y = t * (2 + 1e-4 avg5(t^2))^-0.75 (5 x 5,
                    zero padding counted; crema's cuDNN defaults), forward and backward (2T, 3T)
"""
import math

import torch
import torch.nn.functional as F

from cuda_timing import median_ms

DEFAULT_SHAPES = {
    "op-tensor": ["64,256,56,56"], "reduce-tensor": ["64,256,56,56"],
    "transform-tensor": ["64,256,56,56"], "scale": ["64,256,56,56"], "cast": ["64,256,56,56"],
    "layout": ["64,256,56,56"],
    "loss": ["8,21,512,512"], "accuracy": ["8,21,512,512"],  # PASCAL VOC segmentation, batch 8
    "optimizer": ["resnet18-cifar"],  # the weights below; no other shape
    "im2col": ["32,64,56,56"], "lcn": ["32,64,56,56"],
}


def resnet18_cifar_weights():
    """The CIFAR ResNet-18's convolution and fc weights, as crema's bench_training_ops.cpp."""
    w = [(64, 3, 3, 3)] + [(64, 64, 3, 3)] * 4
    for c in (128, 256, 512):
        w += [(c, c // 2, 3, 3)] + [(c, c, 3, 3)] * 3 + [(c, c // 2, 1, 1)]
    return w + [(10, 512)]


def bench(op, text, dims, args, peak):
    """The rows of one op on one shape (f32; dims N,C,H,W, unused by optimizer)."""
    def time(fn):
        return median_ms(fn, args.warmup, args.repeats)

    def row(label, pass_, ms, moved):
        gbps = moved / ms / 1e6
        print(f"{label:32s} {pass_:15s} {'torch':10s} {ms:10.4f} {gbps:8.1f} "
              f"{100 * gbps / peak:6.1f}", flush=True)

    def rand(shape, low=-1.0, high=1.0, grad=False):
        t = torch.rand(shape, device="cuda") * (high - low) + low
        return t.requires_grad_(grad)

    if op == "optimizer":
        shapes = resnet18_cifar_weights()
        count = sum(math.prod(s) for s in shapes)
        for name, make, moved in (
                ("sgd momentum", lambda p, **k: torch.optim.SGD(p, 0.01, momentum=0.9,
                                                               weight_decay=5e-4, **k), 6),
                ("adam", lambda p, **k: torch.optim.Adam(p, 0.01, weight_decay=5e-4, **k), 8)):
            params = [rand(s, -0.5, 0.5, True) for s in shapes]
            for p in params:
                p.grad = rand(p.shape, -0.1, 0.1)
            try:
                opt = make(params, fused=True)
            except (RuntimeError, TypeError, ValueError):
                opt = make(params, foreach=True)
            row(f"resnet18-cifar {len(shapes)} tensors f32", name, time(opt.step),
                count * 4 * moved)
        return

    label = text + " f32"
    n, c, h, w = dims
    numel = n * c * h * w
    tensor = numel * 4
    copies = max(1, math.ceil(200e6 / (3 * tensor)))
    turn = [0]

    def rotate():
        k = turn[0] % copies
        turn[0] += 1
        return k

    xs = [rand(dims) for _ in range(copies)]
    if op == "op-tensor":
        bs = [rand(dims) for _ in range(copies)]
        b_c = rand([1, c, 1, 1])
        outs = [torch.empty_like(x) for x in xs]

        def add():
            k = rotate()
            torch.add(xs[k], b_c, out=outs[k])

        def mul():
            k = rotate()
            torch.mul(xs[k], bs[k], out=outs[k])

        row(label, "add b[C]", time(add), 2 * tensor)
        row(label, "mul", time(mul), 3 * tensor)
    elif op == "reduce-tensor":
        row(label, "sum over HxW", time(lambda: xs[rotate()].sum((2, 3), keepdim=True)), tensor)
        row(label, "amax over all",
            time(lambda: torch.linalg.vector_norm(xs[rotate()], math.inf)), tensor)
    elif op in ("transform-tensor", "layout"):
        to_nhwc = [torch.empty(n, h, w, c, device="cuda") for _ in range(copies)]

        def forward():
            k = rotate()
            to_nhwc[k].copy_(xs[k].permute(0, 2, 3, 1))

        row(label, "nchw->nhwc", time(forward), 2 * tensor)
        if op == "layout":
            def backward():
                k = rotate()
                xs[k].copy_(to_nhwc[k].permute(0, 3, 1, 2))

            row(label, "nhwc->nchw", time(backward), 2 * tensor)
    elif op == "scale":
        dys = [rand(dims) for _ in range(copies)]
        outs = [torch.empty_like(x) for x in xs]
        s, b = rand([1, c, 1, 1], 0.5, 1.5), rand([1, c, 1, 1], -0.5, 0.5)

        def forward():
            k = rotate()
            torch.addcmul(b, xs[k], s, out=outs[k])

        def sums():
            k = rotate()
            return (dys[k] * xs[k]).sum((0, 2, 3)), dys[k].sum((0, 2, 3))

        row(label, "fwd", time(forward), 2 * tensor)
        row(label, "bwd sums", time(sums), 2 * tensor)
    elif op == "cast":
        halves = [torch.empty(dims, device="cuda", dtype=torch.bfloat16) for _ in range(copies)]

        def narrow():
            k = rotate()
            halves[k].copy_(xs[k])

        def widen():
            k = rotate()
            xs[k].copy_(halves[k])

        row(label, "f32->bf16", time(narrow), 1.5 * tensor)
        row(label, "bf16->f32", time(widen), 1.5 * tensor)
    elif op in ("loss", "accuracy"):
        logits = rand(dims, -3.0, 3.0, op == "loss")
        labels = torch.randint(0, c, (n, h, w), device="cuda")
        moved = 2 * tensor + numel // c * 4
        if op == "accuracy":
            row(label, "top-1", time(lambda: (logits.argmax(1) == labels).float().mean()),
                tensor + numel // c * 4)
        else:
            row(label, "fwd", time(lambda: F.cross_entropy(logits, labels)), moved)
            loss = F.cross_entropy(logits, labels)
            row(label, "bwd",
                time(lambda: torch.autograd.grad(loss, logits, retain_graph=True)), moved)
    elif op == "im2col":
        row(label, "3x3 p1 s1", time(lambda: F.unfold(xs[rotate()], 3, padding=1)), 10 * tensor)
    elif op == "lcn":
        def lcn(x):
            t = x - F.avg_pool2d(x, 5, 1, 2, count_include_pad=True)
            d = 2.0 + 1e-4 * F.avg_pool2d(t * t, 5, 1, 2, count_include_pad=True)
            return t * d.pow(-0.75)

        inputs = [rand(dims, grad=True) for _ in range(copies)]
        row(label, "fwd 5x5", time(lambda: lcn(inputs[rotate()])), 2 * tensor)
        outs = [lcn(x) for x in inputs]
        dys = [rand(dims) for _ in range(copies)]

        def backward():
            k = rotate()
            return torch.autograd.grad(outs[k], inputs[k], dys[k], retain_graph=True)

        row(label, "bwd 5x5", time(backward), 3 * tensor)
