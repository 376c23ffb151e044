#!/usr/bin/python3
"""`crema export --onnx` writes nets that onnxruntime runs to crema's outputs.

Run by ctest (tests/CMakeLists.txt); it needs onnxruntime and numpy, and runs itself again with
$CREMA_ONNX_PYTHON where its own Python lacks them (scripts/test.sh makes build/onnx-venv: Debian's
python3 with its packages, plus onnxruntime from PyPI):
    build/onnx-venv/bin/python tests/apps/onnx_export_test.py build/bin/crema

Each net below is trained for two iterations on a small folder of odd-sized RGB images (so batch
norm's running statistics and every weight are non-trivial), then
  1. `crema test --extract data,OUT` saves the inputs crema fed and its outputs;
  2. `crema export --onnx` writes the model; onnxruntime runs it on the same inputs;
  3. the outputs agree within 1e-4 relative: max |ort - crema| / max |crema|.
Between them the nets use every layer type that has an ONNX form (Convolution in 1-D and 3-D
too). Then the refusals: a layer with no ONNX form, a 3-D pooling (exported 2-D only), and a
missing --onnx/--weights, each exit 2 with one line naming the problem.
Exit code 0: passed; 1: failed; 77: skipped (no onnxruntime), which ctest reports as skipped.
"""
import json
import os
import struct
import subprocess
import sys
import tempfile

try:
    import numpy as np
    import onnxruntime
    from PIL import Image
except ImportError as e:
    venv_python = os.environ.pop("CREMA_ONNX_PYTHON", "")  # popped: one try, no loop
    if venv_python and os.path.exists(venv_python):
        os.execv(venv_python, [venv_python] + sys.argv)  # onnxruntime lives in build/onnx-venv
    print(f"SKIPPED: {e} (scripts/test.sh makes build/onnx-venv with onnxruntime)")
    sys.exit(77)

TOLERANCE = 1e-4  # relative to the largest output; fp32 sums in a different order


def layer(name, type_, bottom, top, **keys):
    return dict(name=name, type=type_, bottom=bottom, top=top, **keys)


# The nets: model.layers ending in a head `out` [N, 2] or any output named by "outputs".
NETS = {
    "convolutional": [
        layer("conv1", "Convolution", "data", "conv1", num_output=6, kernel_size=3, pad=1),
        layer("bn1", "BatchNorm", "conv1", "conv1"),
        layer("relu1", "ReLU", "conv1", "conv1"),
        layer("pool1", "Pooling", "conv1", "pool1", pool="max", kernel_size=3, stride=2, pad=1),
        layer("conv2", "Convolution", "pool1", "conv2", num_output=6, kernel_size=[3, 1],
              pad=[1, 0], group=2, dilation=1),
        layer("leaky", "ReLU", "conv2", "conv2", negative_slope=0.1),
        layer("shuffle", "ChannelShuffle", "conv2", "shuffled", groups=2),
        layer("dw", "Convolution", "shuffled", "dw", num_output=6, kernel_size=3, pad=2, dilation=2,
              group=6, bias_term=False),
        layer("bn2", "BatchNorm", "dw", "bn2", affine=False),
        layer("scale2", "Scale", "bn2", "bn2", bias_term=True),
        layer("prelu", "PReLU", "bn2", "bn2"),
        layer("sum", "Eltwise", ["bn2", "conv2"], "sum", operation="SUM", coeff=[0.5, -1.5]),
        layer("ave", "Pooling", "sum", "ave", pool="average", kernel_size=3, stride=2, pad=1),
        layer("ave_ex", "Pooling", "sum", "ave_ex", pool="average", kernel_size=2, stride=2,
              count_include_pad=False, round_mode="floor"),
        # Caffe's ceil rounding past the padding on odd sizes: a clipped last window.
        layer("ave_c", "Pooling", "sum", "ave_c", pool="average", kernel_size=2, stride=2),
        layer("max_c", "Pooling", "sum", "max_c", pool="max", kernel_size=2, stride=2),
        layer("gap", "Pooling", "ave", "gap", pool="average", global_pooling=True),
        layer("gmp", "Pooling", "ave_ex", "gmp", pool="max", global_pooling=True),
        layer("flat_c", "Flatten", "ave_c", "flat_c"),
        layer("flat_m", "Flatten", "max_c", "flat_m"),
        layer("gap_f", "Flatten", "gap", "gap_f"),
        layer("gmp_f", "Flatten", "gmp", "gmp_f"),
        layer("cat", "Concat", ["gap_f", "gmp_f", "flat_c", "flat_m"], "cat"),
        layer("drop", "Dropout", "cat", "cat", dropout_ratio=0.3),
        layer("out", "InnerProduct", "cat", "out", num_output=2),
    ],
    "activations": [
        layer("conv1", "Convolution", "data", "conv1", num_output=4, kernel_size=1),
        layer("slice", "Slice", "conv1", ["a", "b", "c", "d"], axis=1, slice_point=[1, 2, 3]),
        layer("elu", "ELU", "a", "a", alpha=0.7),
        layer("sig", "Sigmoid", "b", "b2"),
        layer("tanh", "TanH", "c", "c2"),
        layer("clip", "Clip", "d", "d2", min=-0.2, max=0.3),
        layer("swish", "Swish", "a", "a2", beta=1.5),
        layer("softsign", "Softsign", "a2", "a2"),
        layer("silu", "SiLU", "b2", "b3"),
        layer("mish", "Mish", "b3", "b4"),
        layer("gelu", "GELU", "c2", "c3"),
        layer("gelu_t", "GELU", "d2", "d3", approximate="tanh"),
        layer("prod", "Eltwise", ["a2", "b4"], "prod", operation="PROD"),
        layer("max", "Eltwise", ["c3", "d3", "prod"], "max", operation="MAX"),
        layer("lrn_in", "Concat", ["max", "a2", "b4", "c3", "d3"], "five"),
        layer("lrn", "LRN", "five", "lrn", local_size=3, alpha=0.5, beta=0.75, k=2.0),
        layer("flat", "Flatten", "lrn", "flat"),
        layer("out", "InnerProduct", "flat", "out", num_output=2),
    ],
    "shapes": [
        layer("deconv", "Deconvolution", "data", "up", num_output=3, kernel_size=3, stride=2,
              pad=1, output_padding=1),
        layer("squeeze", "Pooling", "up", "s", pool="average", global_pooling=True),
        layer("s_flat", "Flatten", "s", "s_flat"),
        layer("gate", "Sigmoid", "s_flat", "s_flat"),
        layer("excite", "Scale", ["up", "s_flat"], "excited", axis=0),
        layer("shift", "Bias", "excited", "shifted"),
        layer("perm", "Permute", "shifted", "nhwc", order=[0, 2, 3, 1]),
        layer("ip_last", "InnerProduct", "nhwc", "mixed", num_output=5, axis=3),
        layer("back", "Permute", "mixed", "nchw", order=[0, 3, 1, 2]),
        layer("reshape", "Reshape", "nchw", "rows", shape=[0, 5, -1]),
        layer("ip_rows", "InnerProduct", "rows", "r", num_output=3, axis=2),
        layer("soft", "Softmax", "r", "soft", axis=2),
        layer("logsoft", "LogSoftmax", "r", "logsoft", axis=-1),
        layer("both", "Concat", ["soft", "logsoft"], "both", axis=2),
        layer("out", "InnerProduct", "both", "out", num_output=2),
    ],
    "zoo_layers": [
        layer("conv1", "Convolution", "data", "conv1", num_output=4, kernel_size=3, pad=1),
        layer("hswish", "Hardswish", "conv1", "conv1"),
        layer("ln_c", "LayerNorm", "conv1", "ln_c", axis=1, eps=1e-6),
        layer("drop_path", "StochasticDepth", "ln_c", "ln_c", p=0.2),
        layer("gamma", "LayerScale", "ln_c", "scaled"),
        layer("hsig", "Hardsigmoid", "scaled", "gated"),
        layer("nhwc", "Permute", "gated", "nhwc", order=[0, 2, 3, 1]),
        layer("ln_last", "LayerNorm", "nhwc", "ln_last"),
        layer("nchw", "Permute", "ln_last", "nchw", order=[0, 3, 1, 2]),
        layer("pool3", "Pooling", "nchw", "pool3", pool="average", output_size=[3, 1]),
        layer("pool1", "Pooling", "nchw", "pool1", pool="max", output_size=1),
        layer("f3", "Flatten", "pool3", "f3"),
        layer("f1", "Flatten", "pool1", "f1"),
        layer("both", "Concat", ["f3", "f1"], "both"),
        layer("out", "InnerProduct", "both", "out", num_output=2),
    ],
    "nd_convolution": [
        # The image as a one-channel volume [N, 1, 3, 9, 11] and as a sequence [N, 3, 99].
        layer("vol", "Reshape", "data", "vol", shape=[0, 1, 3, 9, 11]),
        layer("conv3d", "Convolution", "vol", "c3", num_output=4, kernel_size=[3, 3, 2],
              stride=[1, 2, 1], pad=[1, 1, 0], dilation=[1, 1, 2]),
        layer("relu3", "ReLU", "c3", "c3"),
        layer("seq", "Reshape", "data", "seq", shape=[0, 3, -1]),
        layer("conv1d", "Convolution", "seq", "c1", num_output=4, kernel_size=5, stride=3, pad=2,
              dilation=2, group=1),
        layer("f3", "Flatten", "c3", "f3"),
        layer("f1", "Flatten", "c1", "f1"),
        layer("both", "Concat", ["f3", "f1"], "both"),
        layer("out", "InnerProduct", "both", "out", num_output=2),
    ],
}
HEAD = [
    layer("loss", "SoftmaxWithLoss", ["out", "label"], "loss"),
    layer("accuracy", "Accuracy", ["out", "label"], "accuracy", phase="test"),
]


def write_images(root):
    """8 RGB images of 11x9 pixels in two class folders, smooth plus noise."""
    rng = np.random.default_rng(3)
    for c in range(2):
        os.makedirs(os.path.join(root, f"class{c}"))
        for i in range(4):
            base = np.linspace(0, 255, 11 * 9 * 3).reshape(9, 11, 3) * (0.3 + 0.2 * c)
            pixels = np.clip(base + rng.normal(0, 40, base.shape), 0, 255).astype(np.uint8)
            Image.fromarray(pixels, "RGB").save(os.path.join(root, f"class{c}", f"{i}.png"))


def config(name, layers, images):
    source = {"format": "image_folder", "root": images}
    transform = [{"scale": 1 / 255.0}]
    return {
        "name": f"onnx_{name}",
        "seed": 7,
        "data": {"train": {"source": source, "batch_size": 4, "shuffle": True, "transform": transform},
                 "test": {"source": source, "batch_size": 3, "transform": transform}},
        "model": {"inputs": {"data": [3, 9, 11], "label": []}, "layers": layers + HEAD},
        "solver": {"type": "sgd", "base_lr": 0.05, "momentum": 0.9, "max_iter": 2, "display": 1,
                   "test_interval": 0},
    }


def read_safetensors(path):
    with open(path, "rb") as f:
        (length,) = struct.unpack("<Q", f.read(8))
        header = json.loads(f.read(length))
        data = f.read()
    out = {}
    for name, info in header.items():
        if name != "__metadata__":
            begin, end = info["data_offsets"]
            out[name] = np.frombuffer(data[begin:end], dtype=np.float32).reshape(info["shape"])
    return out


def run(args, expect=0):
    p = subprocess.run(args, capture_output=True, text=True)
    if p.returncode != expect:
        raise AssertionError(f"{' '.join(args)} exited {p.returncode}, expected {expect}:\n"
                             f"{p.stdout}\n{p.stderr}")
    return p


def check_net(crema, work, images, name, layers):
    cfg = os.path.join(work, f"{name}.yaml")
    with open(cfg, "w") as f:
        json.dump(config(name, layers, images), f)  # JSON is YAML
    run_dir = os.path.join(work, f"{name}_run")
    run([crema, "train", cfg, "--out", run_dir, "--threads", "2"])
    weights = os.path.join(run_dir, "final.safetensors")
    extracted = os.path.join(work, f"{name}_out.safetensors")
    run([crema, "test", cfg, "--weights", weights, "--extract", "data,out", "--extract-to", extracted])
    model = os.path.join(work, f"{name}.onnx")
    run([crema, "export", cfg, "--weights", weights, "--onnx", model])
    ours = read_safetensors(extracted)
    session = onnxruntime.InferenceSession(model, providers=["CPUExecutionProvider"])
    names = [i.name for i in session.get_inputs()]
    if names != ["data"]:
        raise AssertionError(f"{name}: the graph's inputs are {names}, expected ['data']")
    (theirs,) = session.run(["out"], {"data": np.ascontiguousarray(ours["data"])})
    error = float(np.max(np.abs(theirs - ours["out"])) / np.max(np.abs(ours["out"])))
    print(f"{name}: {len(session.get_outputs())} output, relative error {error:.2e}")
    if not error <= TOLERANCE:
        raise AssertionError(f"{name}: onnxruntime differs from crema by {error:.2e} (> {TOLERANCE})")


def check_refusals(crema, work, images):
    cfg = os.path.join(work, "rnn.yaml")
    layers = [layer("flat", "Reshape", "data", "seq", shape=[0, 9, 33]),
              layer("lstm", "LSTM", "seq", "h", num_output=4, batch_first=True, outputs=["last"]),
              layer("out", "InnerProduct", "h", "out", num_output=2)]
    with open(cfg, "w") as f:
        json.dump(config("rnn", layers, images), f)
    run_dir = os.path.join(work, "rnn_run")
    run([crema, "train", cfg, "--out", run_dir, "--threads", "2"])
    weights = os.path.join(run_dir, "final.safetensors")
    model = os.path.join(work, "rnn.onnx")
    p = run([crema, "export", cfg, "--weights", weights, "--onnx", model], expect=2)
    lines = p.stderr.strip().splitlines()
    if len(lines) != 1 or "layer 'lstm' (LSTM)" not in lines[0] or "no ONNX form" not in lines[0]:
        raise AssertionError(f"an LSTM's refusal: {p.stderr!r}")
    if os.path.exists(model) or os.path.exists(model + ".partial"):
        raise AssertionError("a refused export left a file behind")
    p = run([crema, "export", cfg, "--weights", weights], expect=2)
    if "--onnx" not in p.stderr:
        raise AssertionError(f"a missing --onnx: {p.stderr!r}")
    cfg = os.path.join(work, "pool3d.yaml")
    layers = [layer("vol", "Reshape", "data", "vol", shape=[0, 1, 3, 9, 11]),
              layer("pool3d", "Pooling", "vol", "p", pool="max", kernel_size=2, stride=2),
              layer("out", "InnerProduct", "p", "out", num_output=2)]
    with open(cfg, "w") as f:
        json.dump(config("pool3d", layers, images), f)
    run_dir = os.path.join(work, "pool3d_run")
    run([crema, "train", cfg, "--out", run_dir, "--threads", "2"])
    weights = os.path.join(run_dir, "final.safetensors")
    p = run([crema, "export", cfg, "--weights", weights, "--onnx", model], expect=2)
    lines = p.stderr.strip().splitlines()
    if (len(lines) != 1 or "layer 'pool3d' (Pooling)" not in lines[0]
            or "2-D pooling only" not in lines[0]):
        raise AssertionError(f"a 3-D pooling's refusal: {p.stderr!r}")
    print("refusals: LSTM, missing --onnx, 3-D pooling")


def main():
    crema = sys.argv[1]
    with tempfile.TemporaryDirectory() as work:
        images = os.path.join(work, "images")
        write_images(images)
        failures = 0
        for name, layers in NETS.items():
            try:
                check_net(crema, work, images, name, layers)
            except AssertionError as e:
                print(f"FAILED {e}")
                failures += 1
        try:
            check_refusals(crema, work, images)
        except AssertionError as e:
            print(f"FAILED {e}")
            failures += 1
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
