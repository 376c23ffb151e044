"""PyTorch's side of crema bench pooling | softmax | lrn | activation | eltwise | dropout | concat,
run by peer_memory_bound.py (its docstring says what each op times). Rows name their shapes and
count bytes as crema's tables do (apps/bench_pooling_ops.cpp, apps/bench_pointwise_ops.cpp), so
the GB/s columns compare call for call."""
import math

import torch
import torch.nn.functional as F

from cuda_timing import median_ms

DEFAULT_SHAPES = {
    "pooling": ["64,64,112,112"],  # ResNet's stem pool input at batch 64
    "softmax": ["4096,1000", "256,32000"],  # ImageNet's classes; a language model's vocabulary
    "lrn": ["64,96,55,55"],  # AlexNet's first LRN at batch 64
    "activation": ["64,256,56,56"],  # ResNet-50's stage 1 at batch 64
    "eltwise": ["64,256,56,56"],
    "dropout": ["64,256,56,56"],
    "concat": ["64,128,28,28"],  # each part; two along C
}
# (name, kernel, stride, padding), as crema's kWindows.
WINDOWS = [("3x3s2p1", 3, 2, 1), ("2x2s2", 2, 2, 0)]
ACTIVATIONS = {
    "relu": F.relu, "sigmoid": torch.sigmoid, "tanh": torch.tanh, "silu": F.silu,
    "gelu": F.gelu, "gelu_tanh": lambda x: F.gelu(x, approximate="tanh"),
}


class Rotation:
    """Copies of a working set of `bytes` so that no timed call finds its inputs in L2 (~200 MB of
    traffic between reuses, as crema bench's rotation_copies)."""

    def __init__(self, bytes_):
        self.copies = max(1, math.ceil(200e6 / bytes_))
        self.turn = 0

    def next(self):
        k = self.turn % self.copies
        self.turn += 1
        return k


def dtype_and_layout(op, dtype, layout):
    """What op's rows run in: the dtype (crema's softmax and lrn take f32 only) and the layout
    their labels name ("" where the op has none: only pooling takes --layout, lrn is nchw)."""
    if op in ("softmax", "lrn"):
        dtype = torch.float32
    return dtype, layout if op == "pooling" else ("nchw" if op == "lrn" else "")


def bench(op, text, dims, dtype, args, peak):
    """The rows of one op on one shape (dims: N,C,H,W, or softmax's N,C)."""
    dtype, layout = dtype_and_layout(op, dtype, args.layout)
    fmt = torch.channels_last if layout == "nhwc" else torch.contiguous_format
    name = "f32" if dtype == torch.float32 else "bf16"
    size = torch.finfo(dtype).bits // 8

    def make(shape, grad=False):
        t = torch.rand(shape, device="cuda", dtype=dtype) * 2 - 1
        if len(shape) == 4:
            t = t.contiguous(memory_format=fmt)
        return t.requires_grad_(grad)

    def row(what, pass_, ms, moved):
        """One row; pooling's and activation's `what` goes in the pass column, as crema's."""
        gbps = moved / ms / 1e6
        in_pass = op in ("pooling", "activation")
        label = " ".join(p for p in (text, "" if in_pass else what, name, layout) if p)
        pass_ = f"{what} {pass_}" if in_pass else pass_
        print(f"{label:32s} {pass_:15s} {'torch':10s} {ms:10.4f} {gbps:8.1f} "
              f"{100 * gbps / peak:6.1f}", flush=True)

    def time(fn):
        return median_ms(fn, args.warmup, args.repeats)

    def forward_backward(what, f, shape, fwd_bytes, bwd_bytes):
        """Times f(x) and the gradient of x through one forward's graph per copy."""
        rot = Rotation(fwd_bytes + bwd_bytes)
        xs = [make(shape, True) for _ in range(rot.copies)]
        outs = [f(x) for x in xs]
        dys = [torch.rand_like(o) for o in outs]
        row(what, "fwd", time(lambda: f(xs[rot.next()])), fwd_bytes)

        def bwd():
            k = rot.next()
            return torch.autograd.grad(outs[k], xs[k], dys[k], retain_graph=True)

        row(what, "bwd", time(bwd), bwd_bytes)
        del outs

    numel = math.prod(dims)
    tensor = numel * size
    if op == "pooling":
        n, c, h, w = dims
        for window, k, s, p in WINDOWS:
            out = n * c * ((h + 2 * p - k) // s + 1) * ((w + 2 * p - k) // s + 1)
            for mode, f in (("max", F.max_pool2d), ("avg", F.avg_pool2d)):
                argmax = out * 4 if mode == "max" else 0  # crema's f32 argmax
                moved = tensor + out * size + argmax
                forward_backward(f"{mode} {window}", lambda x, f=f, k=k, s=s, p=p: f(x, k, s, p),
                                 dims, moved, moved)
    elif op == "softmax":
        forward_backward("", lambda x: F.softmax(x, 1), dims, 2 * tensor, 3 * tensor)
    elif op == "lrn":
        forward_backward("n5", lambda x: F.local_response_norm(x, 5, 1e-4, 0.75, 1.0), dims,
                         3 * tensor, 5 * tensor)
    elif op == "activation":
        for what, f in ACTIVATIONS.items():
            forward_backward(what, f, dims, 2 * tensor, 3 * tensor)
    elif op == "eltwise":
        rot = Rotation(3 * tensor)
        a = [make(dims) for _ in range(rot.copies)]
        b = [make(dims) for _ in range(rot.copies)]
        o = [make(dims) for _ in range(rot.copies)]

        def add():
            k = rot.next()
            torch.add(a[k], b[k], out=o[k])

        def add_in_place():
            k = rot.next()
            a[k].add_(b[k])

        row("", "a+b", time(add), 3 * tensor)
        row("", "a+=b", time(add_in_place), 3 * tensor)
    elif op == "dropout":
        forward_backward("p0.5", lambda x: F.dropout(x, 0.5, training=True), dims, 2 * tensor,
                         2 * tensor)
    elif op == "concat":
        n, c, h, w = dims
        rot = Rotation(4 * tensor)
        parts = [(make(dims), make(dims)) for _ in range(rot.copies)]
        wholes = [make([n, 2 * c, h, w]) for _ in range(rot.copies)]
        grads = [(make(dims), make(dims)) for _ in range(rot.copies)]

        def cat():
            k = rot.next()
            torch.cat(parts[k], 1, out=wholes[k])

        def split():
            k = rot.next()
            grads[k][0].copy_(wholes[k][:, :c])
            grads[k][1].copy_(wholes[k][:, c:])

        row("x2 along C", "fwd", time(cat), 4 * tensor)
        row("x2 along C", "bwd", time(split), 4 * tensor)
