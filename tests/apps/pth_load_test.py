#!/usr/bin/python3
"""A PyTorch state_dict saved by torch.save loads into the equivalent crema config through
--weights and gives PyTorch's outputs.

Run by ctest (tests/CMakeLists.txt) with Debian's /usr/bin/python3 and python3-torch:
    /usr/bin/python3 tests/apps/pth_load_test.py build/bin/crema

LeNet with a BatchNorm after conv1 (pytorch_load_test.py's module and config), random weights and
running statistics, saved as:
  lenet.pth           torch.save(model.state_dict())                       (f32)
  lenet_f16.pth       the state_dict in float16, lenet_bf16.pth in bfloat16 (num_batches_tracked
                      stays int64: an int64 scalar [])
  checkpoint.pth      {'epoch', 'model': <state_dict of nn.DataParallel(model)>, 'optimizer'}
  lenet_f16.safetensors, lenet_bf16.safetensors   the 16-bit state_dicts as safetensors
`crema test --weights FILE --extract ip2` on a small synthetic IDX set gives the logits; PyTorch's
module, holding the same weights widened to float32, in eval mode and float64, must agree within
1e-5. `crema train --weights` starts from the bf16 file and its log says what was converted.
Exit code 0: passed; 1: failed; 77: skipped (no torch), which ctest reports as skipped.
"""
import json
import os
import struct
import subprocess
import sys
import tempfile
from collections import OrderedDict

try:
    import torch
except ImportError:
    print("SKIPPED: /usr/bin/python3 has no torch (apt-get install python3-torch; scripts/test.sh installs it)")
    sys.exit(77)

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from pytorch_load_test import LeNet, SAMPLES, config, read_safetensors, write_idx  # noqa: E402


def write_safetensors(path, tensors):
    """The format's definition, for float16, bfloat16, float32 and int64 tensors."""
    names = {torch.float16: "F16", torch.bfloat16: "BF16", torch.float32: "F32", torch.int64: "I64"}
    header, blobs, offset = {}, [], 0
    for name, t in tensors.items():
        t = t.detach().contiguous()
        raw = t.view(torch.int16) if t.dtype in (torch.float16, torch.bfloat16) else t
        data = raw.numpy().tobytes()
        header[name] = {"dtype": names[t.dtype], "shape": list(t.shape),
                        "data_offsets": [offset, offset + len(data)]}
        blobs.append(data)
        offset += len(data)
    text = json.dumps(header).encode()
    text += b" " * (-len(text) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)) + text + b"".join(blobs))


def cast(state, dtype):
    return OrderedDict((k, v.to(dtype) if v.is_floating_point() else v) for k, v in state.items())


def main():
    crema = os.path.abspath(sys.argv[1] if len(sys.argv) > 1 else "build/bin/crema")
    torch.manual_seed(15)
    model = LeNet(batch_norm=True)
    with torch.no_grad():
        model.bn1.weight.uniform_(0.5, 1.5)
        model.bn1.bias.uniform_(-0.2, 0.2)
        model.bn1.running_mean.uniform_(-0.1, 0.1)
        model.bn1.running_var.uniform_(0.5, 2.0)
    model.bn1.num_batches_tracked.fill_(5)
    state = model.state_dict()
    with tempfile.TemporaryDirectory(prefix="crema_pth_") as work:
        images = write_idx(work, seed=13)
        cfg = os.path.join(work, "net.yaml")
        with open(cfg, "w") as f:
            f.write(config(work, batch_norm=True))
        files = {}  # file -> (state_dict as crema must read it, what the output must mention)
        files["lenet.pth"] = (state, None)
        for dtype, name in ((torch.float16, "f16"), (torch.bfloat16, "bf16")):
            low = cast(state, dtype)
            torch.save(low, os.path.join(work, f"lenet_{name}.pth"))
            write_safetensors(os.path.join(work, f"lenet_{name}.safetensors"), low)
            note = f"converted 12 {name} tensors to f32"  # all but the int64 num_batches_tracked
            files[f"lenet_{name}.pth"] = files[f"lenet_{name}.safetensors"] = (cast(low, torch.float32), note)
        torch.save(state, os.path.join(work, "lenet.pth"))
        parallel = torch.nn.DataParallel(model)
        optimizer = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
        torch.save({"epoch": 3, "model": parallel.state_dict(), "optimizer": optimizer.state_dict()},
                   os.path.join(work, "checkpoint.pth"))
        files["checkpoint.pth"] = (state, "the state_dict under 'model'; 'module.' prefixes removed")

        for name, (expected, note) in files.items():
            outputs = os.path.join(work, name + ".ip2.safetensors")
            run = subprocess.run([crema, "test", cfg, "--weights", os.path.join(work, name), "--extract", "ip2",
                                  "--extract-to", outputs, "--threads", "2"],
                                 check=True, capture_output=True, text=True)
            if note:
                assert note in run.stdout, (name, run.stdout)
            reference = LeNet(batch_norm=True)
            reference.load_state_dict(expected, strict=True)
            reference.eval()
            with torch.no_grad():
                exact = reference.double()(images.double())
            ours = read_safetensors(outputs)["ip2"].double()
            worst = (ours - exact).abs().max().item()
            print(f"{name}: logits vs PyTorch float64 on the same weights: largest difference {worst:.2e}")
            assert ours.shape == (SAMPLES, 10), ours.shape
            assert torch.allclose(ours, exact, rtol=1e-5, atol=1e-5), (name, worst)

        run = subprocess.run([crema, "train", cfg, "--weights", os.path.join(work, "lenet_bf16.pth"), "--out",
                              os.path.join(work, "run"), "--stop-after", "1", "--threads", "2"],
                             check=True, capture_output=True, text=True)
        line = [l for l in run.stdout.splitlines() if l.startswith("weights from")]
        print(line[0])
        assert "copied 13 tensors (converted 12 bf16 tensors to f32)" in line[0], line
    print("PASSED")


if __name__ == "__main__":
    try:
        main()
    except (AssertionError, subprocess.CalledProcessError) as e:
        print(f"FAILED: {type(e).__name__}: {e}")
        if isinstance(e, subprocess.CalledProcessError):
            print(e.stderr)
        sys.exit(1)
