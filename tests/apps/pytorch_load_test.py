#!/usr/bin/python3
"""A crema checkpoint loads into the equivalent PyTorch module and gives crema's outputs.

Run by ctest (tests/CMakeLists.txt) with Debian's /usr/bin/python3 and python3-torch, which
scripts/test.sh installs:  /usr/bin/python3 tests/apps/pytorch_load_test.py build/bin/crema

For LeNet, and LeNet with a BatchNorm after conv1 (its running statistics and
num_batches_tracked are buffers), on a small synthetic IDX dataset written here:
  1. `crema train` runs a few iterations and writes checkpoints/last/model.safetensors;
  2. `crema test --extract ip2` saves crema's logits for every test image;
  3. the checkpoint is read with a safetensors reader written here from the format's definition,
     loaded with load_state_dict(strict=True) (every name and shape must match PyTorch's), and
     the module's logits on the same images are compared with crema's: within 1e-5.
The same for a row LSTM (each image as 28 steps of 28 pixels; two bidirectional LSTM layers,
`outputs: [last]`, then ip2): its checkpoint loads strictly into torch.nn.LSTM + nn.Linear, and
the logits agree.
Exit code 0: passed; 1: failed; 77: skipped (no torch), which ctest reports as skipped.
"""
import gzip
import json
import os
import struct
import subprocess
import sys
import tempfile

try:
    import torch
    import torch.nn.functional as F
except ImportError:
    print("SKIPPED: /usr/bin/python3 has no torch (apt-get install python3-torch; scripts/test.sh installs it)")
    sys.exit(77)

SAMPLES = 70  # test batches of 32: 32 + 32 + 6, an awkward last batch


def write_idx(directory, seed):
    """Images of 28x28 where class c lights a 6x6 block at a place that depends on c, over noise."""
    g = torch.Generator().manual_seed(seed)
    labels = torch.randint(0, 10, (SAMPLES,), generator=g)
    images = torch.randint(0, 90, (SAMPLES, 28, 28), generator=g)
    for n, c in enumerate(labels.tolist()):
        row, col = (c // 4) * 8 + 2, (c % 4) * 6 + 2
        images[n, row:row + 6, col:col + 6] += 150
    with gzip.open(os.path.join(directory, "images.gz"), "wb") as f:
        f.write(struct.pack(">IIII", 0x803, SAMPLES, 28, 28) + bytes(images.flatten().tolist()))
    with gzip.open(os.path.join(directory, "labels.gz"), "wb") as f:
        f.write(struct.pack(">II", 0x801, SAMPLES) + bytes(labels.tolist()))
    return images.to(torch.float32).reshape(SAMPLES, 1, 28, 28) / 256.0


def config(directory, batch_norm):
    source = "{format: idx, images: %s/images.gz, labels: %s/labels.gz}" % (directory, directory)
    bn = "    - {name: bn1, type: BatchNorm, bottom: conv1, top: conv1}\n" if batch_norm else ""
    return f"""name: lenet_pytorch_check
seed: 5
data:
  train: {{source: {source}, batch_size: 16, shuffle: true, transform: [{{scale: 0.00390625}}]}}
  test: {{source: {source}, batch_size: 32, transform: [{{scale: 0.00390625}}]}}
model:
  inputs: {{data: [1, 28, 28], label: []}}
  layers:
    - {{name: conv1, type: Convolution, bottom: data, top: conv1, num_output: 20, kernel_size: 5}}
{bn}    - {{name: pool1, type: Pooling, bottom: conv1, top: pool1, pool: max, kernel_size: 2, stride: 2}}
    - {{name: conv2, type: Convolution, bottom: pool1, top: conv2, num_output: 50, kernel_size: 5}}
    - {{name: pool2, type: Pooling, bottom: conv2, top: pool2, pool: max, kernel_size: 2, stride: 2}}
    - {{name: ip1, type: InnerProduct, bottom: pool2, top: ip1, num_output: 500, bias_filler: {{type: uniform, min: -0.1, max: 0.1}}}}
    - {{name: relu1, type: ReLU, bottom: ip1, top: ip1}}
    - {{name: ip2, type: InnerProduct, bottom: ip1, top: ip2, num_output: 10, bias_filler: {{type: uniform, min: -0.1, max: 0.1}}}}
    - {{name: loss, type: SoftmaxWithLoss, bottom: [ip2, label], top: loss}}
    - {{name: accuracy, type: Accuracy, bottom: [ip2, label], top: accuracy, phase: test}}
solver: {{type: sgd, base_lr: 0.01, momentum: 0.9, weight_decay: 0.0005, max_iter: 12,
          display: 4, test_interval: 0, snapshot_interval: 6}}
"""


def read_safetensors(path):
    """The format's definition: u64 header length, JSON header, raw little-endian data."""
    dtypes = {"F32": torch.float32, "F64": torch.float64, "I64": torch.int64}
    with open(path, "rb") as f:
        (length,) = struct.unpack("<Q", f.read(8))
        header = json.loads(f.read(length))
        data = f.read()
    tensors = {}
    for name, info in header.items():
        if name == "__metadata__":
            continue
        begin, end = info["data_offsets"]
        t = torch.frombuffer(bytearray(data[begin:end]), dtype=dtypes[info["dtype"]])
        tensors[name] = t.reshape(info["shape"])
    return tensors


class LeNet(torch.nn.Module):
    def __init__(self, batch_norm):
        super().__init__()
        self.conv1 = torch.nn.Conv2d(1, 20, 5)
        self.bn1 = torch.nn.BatchNorm2d(20) if batch_norm else None
        self.conv2 = torch.nn.Conv2d(20, 50, 5)
        self.ip1 = torch.nn.Linear(800, 500)
        self.ip2 = torch.nn.Linear(500, 10)

    def forward(self, x):
        x = self.conv1(x)
        if self.bn1 is not None:
            x = self.bn1(x)
        x = F.max_pool2d(x, 2, 2)
        x = F.max_pool2d(self.conv2(x), 2, 2)
        x = F.relu(self.ip1(torch.flatten(x, 1)))
        return self.ip2(x)


def train_and_extract(crema, work, cfg):
    """Trains `cfg` into work/run, then runs the test set through its last checkpoint; returns
    the paths of that checkpoint's model.safetensors and of the extracted ip2 logits."""
    run = os.path.join(work, "run")
    subprocess.run([crema, "train", cfg, "--out", run, "--threads", "2"], check=True, stdout=subprocess.DEVNULL)
    checkpoint = os.path.join(run, "checkpoints", "last", "model.safetensors")
    outputs = os.path.join(work, "ip2.safetensors")
    subprocess.run([crema, "test", cfg, "--weights", checkpoint, "--extract", "ip2", "--extract-to", outputs],
                   check=True, stdout=subprocess.DEVNULL)
    return checkpoint, outputs


def check(crema, directory, batch_norm):
    name = "lenet_bn" if batch_norm else "lenet"
    work = os.path.join(directory, name)
    os.makedirs(work)
    images = write_idx(work, seed=11 if batch_norm else 10)
    cfg = os.path.join(work, "net.yaml")
    with open(cfg, "w") as f:
        f.write(config(work, batch_norm))
    checkpoint, outputs = train_and_extract(crema, work, cfg)

    model = LeNet(batch_norm)
    state = read_safetensors(checkpoint)
    model.load_state_dict(state, strict=True)  # raises on any name or shape PyTorch does not expect
    model.eval()
    with torch.no_grad():
        ours = read_safetensors(outputs)["ip2"]
        theirs = model(images)
        exact = model.double()(images.double())
    assert ours.shape == (SAMPLES, 10), ours.shape
    error = ((ours.double() - exact).norm() / exact.norm()).item()
    worst = (ours.double() - exact).abs().max().item()
    print(f"{name}: {len(state)} tensors loaded strictly; logits vs PyTorch float64: relative error "
          f"{error:.2e}, largest difference {worst:.2e}; vs PyTorch float32: "
          f"{(ours - theirs).abs().max().item():.2e}")
    if batch_norm:
        tracked = model.bn1.num_batches_tracked.item()
        print(f"{name}: bn1.num_batches_tracked = {tracked}, running_var mean {model.bn1.running_var.mean():.4f}")
        assert tracked == 12, tracked  # one update per training iteration
    assert torch.allclose(ours.double(), exact, rtol=1e-5, atol=1e-5), (error, worst)
    assert torch.allclose(ours, theirs, rtol=1e-5, atol=1e-5)


ROW_LSTM_LAYERS = """    - {name: rows, type: Reshape, bottom: data, top: rows, shape: [0, 28, 28]}
    - {name: lstm, type: LSTM, bottom: rows, top: last, num_output: 16, num_layers: 2,
       bidirectional: true, batch_first: true, outputs: [last]}
    - {name: ip2, type: InnerProduct, bottom: last, top: ip2, num_output: 10}
"""


class RowLSTM(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.lstm = torch.nn.LSTM(28, 16, num_layers=2, bidirectional=True, batch_first=True)
        self.ip2 = torch.nn.Linear(32, 10)

    def forward(self, x):
        _, (h_n, _) = self.lstm(x.view(x.shape[0], 28, 28))
        return self.ip2(torch.cat([h_n[-2], h_n[-1]], dim=1))  # crema's `last`


def check_row_lstm(crema, directory):
    work = os.path.join(directory, "row_lstm")
    os.makedirs(work)
    images = write_idx(work, seed=12)
    lenet = config(work, batch_norm=False)
    begin = lenet.index("    - {name: conv1")
    end = lenet.index("    - {name: loss")
    with open(os.path.join(work, "net.yaml"), "w") as f:
        f.write(lenet[:begin] + ROW_LSTM_LAYERS + lenet[end:])
    checkpoint, outputs = train_and_extract(crema, work, os.path.join(work, "net.yaml"))
    model = RowLSTM()
    state = read_safetensors(checkpoint)
    model.load_state_dict(state, strict=True)
    with torch.no_grad():
        ours = read_safetensors(outputs)["ip2"]
        exact = model.double()(images.double())
    error = ((ours.double() - exact).norm() / exact.norm()).item()
    print(f"row_lstm: {len(state)} tensors loaded strictly; logits vs PyTorch float64: relative "
          f"error {error:.2e}, largest difference {(ours.double() - exact).abs().max().item():.2e}")
    assert ours.shape == (SAMPLES, 10), ours.shape
    assert torch.allclose(ours.double(), exact, rtol=1e-5, atol=1e-5), error


def main():
    crema = os.path.abspath(sys.argv[1] if len(sys.argv) > 1 else "build/bin/crema")
    with tempfile.TemporaryDirectory(prefix="crema_pytorch_") as directory:
        check(crema, directory, batch_norm=False)
        check(crema, directory, batch_norm=True)
        check_row_lstm(crema, directory)
    print("PASSED")


if __name__ == "__main__":
    try:
        main()
    except (AssertionError, subprocess.CalledProcessError, RuntimeError) as e:
        print(f"FAILED: {type(e).__name__}: {e}")
        sys.exit(1)
