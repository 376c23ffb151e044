#!/usr/bin/python3
"""Every configs/zoo/NAME.yaml computes torchvision's NAME: the same logits from the same weights.

Run by ctest (tests/CMakeLists.txt) with Debian's /usr/bin/python3, python3-torch and
python3-torchvision, which scripts/test.sh installs:
    /usr/bin/python3 tests/zoo/zoo_logits_test.py build/bin/crema [--device cuda:0] [NAME...]
(crema runs on the CPU unless --device names a GPU; torchvision always runs on the CPU.)

For each architecture (all of ARCHITECTURES in scripts/zoo/make_zoo_configs.py, or those named):
  1. torchvision builds it with random weights (seeded). Every BatchNorm gets random affine
     parameters and running statistics: the statistics of the test images (one pass in training
     mode), then moved and scaled at random, so that inference really normalizes with them;
  2. its state_dict is written twice: by torch.save (.pth, num_batches_tracked an int64 scalar)
     and as safetensors (num_batches_tracked as a [1] float, the shape crema keeps it in);
  3. `crema test configs/zoo/NAME.yaml --weights ... --extract LOGITS` runs 4 images of 224 x 224
     from each file (PNG files in an image folder; the config's transform replaced by its last two
     steps, /255 and normalize, so both frameworks see the same tensor);
  4. crema's logits must equal torchvision's in eval mode, from either file:
     max |crema - torch| / max |torch| at most 1e-4. crema must also hold exactly as many parameters as torchvision, so with no
     tensor missing (crema test refuses that) none of the file is left unused;
  5. where onnxruntime is found (build/onnx-venv, made by scripts/test.sh: the script runs itself
     there through $CREMA_ONNX_PYTHON), `crema export --onnx` of the net runs in onnxruntime to
     crema's logits within the same 1e-4.
Every NAME_finetune.yaml builds (`crema summary`), and for resnet18 (FINETUNED) the ImageNet-shaped
.pth weights start a 2-iteration fine-tuning run on the 4 images as 4 classes: every tensor but the
head's loads, and the renamed head `fc_new` keeps its filler.
Nets that need layers not yet on this branch are listed in EXPECTED_MISSING, the one place to
switch them on: for such a net only the names are checked (every state_dict entry belongs to a
layer of that name, every Convolution and InnerProduct has the entry's number of outputs), and
once its config builds (`crema summary` succeeds) the test fails until it is removed from the list.
Exit code 0: passed; 1: failed; 77: skipped (no torch or torchvision).
"""
import json
import os
import re
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.path.join(ROOT, "scripts", "zoo"))
sys.path.insert(0, os.path.join(ROOT, "tests", "fixtures"))
sys.path.insert(0, os.path.join(ROOT, "tests", "apps"))

try:
    import onnxruntime  # in build/onnx-venv (scripts/test.sh), over Debian's python3 and packages
except ImportError:
    venv_python = os.environ.pop("CREMA_ONNX_PYTHON", "")  # popped: one try, no loop
    if venv_python and os.path.exists(venv_python):
        os.execv(venv_python, [venv_python] + sys.argv)
    onnxruntime = None

try:
    import torch
    import torchvision
    from PIL import Image
except ImportError as e:
    print(f"SKIPPED: /usr/bin/python3 lacks {e.name} (apt-get install python3-torch "
          "python3-torchvision; scripts/test.sh installs them)")
    sys.exit(77)

from fixture_io import write_safetensors  # noqa: E402 (after the skip)
from make_zoo_configs import ARCHITECTURES, layers_of  # noqa: E402
from pytorch_load_test import read_safetensors  # noqa: E402 (the format's definition, no crema code)

# Architectures whose layers are not in crema yet, with the layers they wait for (none now:
# e.g. "convnext_tiny": "LayerNorm, LayerScale, StochasticDepth" before they were added).
EXPECTED_MISSING = {}
DEVICE = "cpu"
FINETUNED = "resnet18"
FINETUNE_STEPS = 12  # enough for the new head to tell the 4 images apart (clear top-1 margins)
TOLERANCE = 1e-4  # max |crema - torch| / max |torch|, float32 on both sides
IMAGES = 4
MEAN, STD = [0.485, 0.456, 0.406], [0.229, 0.224, 0.225]
SCALE = 0.00392157  # the configs' 1/255
INPUT_TRANSFORM = (f"[{{scale: {SCALE}}}, {{normalize: {{mean: {MEAN}, std: {STD}}}}}]")


def write_images(directory):
    """IMAGES RGB images of 224 x 224, one per class folder: smooth colour gradients with noise,
    so that convolutions see structure at every scale. Returns them as a [N, 3, 224, 224] uint8
    tensor, in the image folder's order (class folders sorted)."""
    g = torch.Generator().manual_seed(15)
    ramp = torch.linspace(0, 1, 224)
    images = []
    for n in range(IMAGES):
        phase = torch.rand(3, 1, 1, generator=g) * 6.28
        waves = torch.sin(ramp.view(1, -1, 1) * (3 + n) * 3.14 + phase) * torch.cos(
            ramp.view(1, 1, -1) * (2 + 2 * n) * 3.14)
        pixels = 128 + 90 * waves + 30 * torch.randn(3, 224, 224, generator=g)
        image = pixels.clamp(0, 255).round().to(torch.uint8)
        folder = os.path.join(directory, f"class{n}")
        os.makedirs(folder)
        Image.fromarray(image.permute(1, 2, 0).numpy()).save(os.path.join(folder, "image.png"))
        images.append(image)
    return torch.stack(images)


def torch_input(images):
    """The configs' /255 and normalize, in float32 and in crema's order of operations."""
    x = images.to(torch.float32) * torch.tensor(SCALE, dtype=torch.float32)
    mean = torch.tensor(MEAN, dtype=torch.float32).view(1, 3, 1, 1)
    std = torch.tensor(STD, dtype=torch.float32).view(1, 3, 1, 1)
    return (x - mean) / std


def build(name, x):
    """torchvision's `name` with seeded random weights and random BatchNorm statistics."""
    torch.manual_seed(sum(map(ord, name)))
    model = getattr(torchvision.models, name)(weights=None)
    norms = [m for m in model.modules() if isinstance(m, torch.nn.BatchNorm2d)]
    model.eval()  # dropout and stochastic depth as in inference, while BatchNorm measures:
    for m in norms:
        m.reset_running_stats()
        m.momentum = None  # a cumulative average: after one batch, that batch's statistics
        m.train()
    with torch.no_grad():
        model(x)
        for m in norms:
            m.running_mean += 0.2 * m.running_var.sqrt() * torch.randn_like(m.running_mean)
            m.running_var *= torch.empty_like(m.running_var).uniform_(0.5, 2.0)
            m.weight.uniform_(0.5, 1.5)
            m.bias.normal_(0, 0.1)
            m.num_batches_tracked.fill_(7)
    return model.eval()


def state_tensors(model):
    """The state_dict as float32 tensors; num_batches_tracked as a [1] float."""
    tensors = {}
    for key, value in model.state_dict().items():
        if key.endswith("num_batches_tracked"):
            value = value.reshape(1).to(torch.float32)
        tensors[key] = value
    return tensors


def crema_parameter_count(crema, config):
    summary = subprocess.run([crema, "summary", config], check=True, capture_output=True,
                             text=True).stdout
    return int(re.search(r"^total\s+(\d+)", summary, re.MULTILINE).group(1))


def check(crema, name, images, folder, work):
    config = os.path.join(ROOT, "configs", "zoo", f"{name}.yaml")
    logits_blob = ARCHITECTURES[name][1]
    start = time.monotonic()
    x = torch_input(images)
    model = build(name, x)
    with torch.no_grad():
        theirs = model(x)
    weights = os.path.join(work, f"{name}.safetensors")
    write_safetensors(weights, state_tensors(model))
    pth = os.path.join(work, f"{name}.pth")
    torch.save(model.state_dict(), pth)
    torch_seconds = time.monotonic() - start

    parameters = sum(p.numel() for p in model.parameters())
    counted = crema_parameter_count(crema, config)
    assert counted == parameters, f"{name}: crema has {counted} parameters, torchvision {parameters}"
    errors, crema_seconds = [], []
    for path in (weights, pth):
        start = time.monotonic()
        outputs = os.path.join(work, f"{name}_logits.safetensors")
        subprocess.run([crema, "test", config, "--weights", path, "--threads", "2",
                        "--device", DEVICE,
                        "--set", f"data.test.source.root={folder}",
                        "--set", f"data.test.batch_size={IMAGES}",
                        "--set", f"data.test.transform={INPUT_TRANSFORM}",
                        "--extract", logits_blob, "--extract-to", outputs],
                       check=True, stdout=subprocess.DEVNULL)
        crema_seconds.append(time.monotonic() - start)
        ours = read_safetensors(outputs)[logits_blob]
        assert ours.shape == theirs.shape, (ours.shape, theirs.shape)
        errors.append(((ours - theirs).abs().max() / theirs.abs().max()).item())
    onnx_error = check_onnx(crema, config, pth, x, ours, logits_blob, work)
    print(f"{name} ({DEVICE}): {parameters} parameters; logits max |crema - torch| / max |torch| = "
          f"{errors[0]:.2e} from safetensors, {errors[1]:.2e} from .pth (max |torch| "
          f"{theirs.abs().max().item():.3g}); onnxruntime vs crema {onnx_error}; torch "
          f"{torch_seconds:.1f} s, crema {crema_seconds[0]:.1f} s + {crema_seconds[1]:.1f} s",
          flush=True)
    assert max(errors) <= TOLERANCE, f"{name}: relative error {max(errors):.2e} above {TOLERANCE}"
    if name == FINETUNED:
        check_finetune(crema, name, pth, folder, work)
    os.remove(weights)
    os.remove(pth)


def check_finetune(crema, name, weights, folder, work):
    """NAME_finetune.yaml trains from the 1000-class weights: all but the head load. Then, the
    whole workflow: the run's weights through `crema predict` on JPEG files give the same top-1
    class as torchvision's model with those weights and its own test transform (Resize 256,
    CenterCrop 224, normalize) on the same files."""
    head = ARCHITECTURES[name][1]
    run = os.path.join(work, f"{name}_finetune")
    result = subprocess.run(
        [crema, "train", os.path.join(ROOT, "configs", "zoo", f"{name}_finetune.yaml"),
         "--weights", weights, "--out", run, "--threads", "2", "--device", DEVICE,
         "--set", f"model.layers.{head}_new.num_output={IMAGES}",
         "--set", f"data.train.source.root={folder}", "--set", f"data.test.source.root={folder}",
         "--set", f"data.train.batch_size={IMAGES}", "--set", f"data.test.batch_size={IMAGES}",
         "--set", "data.train.workers=0", "--set", f"++solver.max_iter={FINETUNE_STEPS}",
         "--set", "solver.base_lr=0.01",
         "--set", "solver.display=1"],
        check=True, capture_output=True, text=True)
    report = re.search(r"weights from .*", result.stdout + result.stderr).group(0)
    print(f"{name}_finetune: {report}")
    kept = re.search(r"keep their fillers: ([^;]*)", report).group(1).split(", ")
    ignored = re.search(r"\(ignored\): (.*)", report).group(1).split(", ")
    assert sorted(kept) == [f"{head}_new.bias", f"{head}_new.weight"], report
    assert sorted(ignored) == [f"{head}.bias", f"{head}.weight"], report
    check_predict(crema, name, os.path.join(run, "final.safetensors"), folder, work)


def check_predict(crema, name, weights, folder, work):
    head = ARCHITECTURES[name][1]
    jpegs = []
    for n, image in enumerate(sorted(os.listdir(folder))):
        path = os.path.join(work, f"photo{n}.jpg")
        Image.open(os.path.join(folder, image, "image.png")).save(path, quality=95)
        jpegs.append(path)
    result = subprocess.run(
        [crema, "predict", os.path.join(ROOT, "configs", "zoo", f"{name}_finetune.yaml"),
         "--weights", weights, "--device", DEVICE, "--json", "--top-k", "1",
         "--set", f"model.layers.{head}_new.num_output={IMAGES}"] + jpegs,
        check=True, capture_output=True, text=True)
    ours = [p["top"][0]["label"] for p in json.loads(result.stdout)]
    model = getattr(torchvision.models, name)(weights=None, num_classes=IMAGES).eval()
    state = {k.replace(f"{head}_new.", f"{head}."): v for k, v in read_safetensors(weights).items()}
    state = {k: v.reshape(()).long() if k.endswith("num_batches_tracked") else v
             for k, v in state.items()}
    model.load_state_dict(state, strict=True)
    transform = torchvision.transforms.Compose([
        torchvision.transforms.Resize(256), torchvision.transforms.CenterCrop(224),
        torchvision.transforms.ToTensor(), torchvision.transforms.Normalize(MEAN, STD)])
    with torch.no_grad():
        logits = model(torch.stack([transform(Image.open(p).convert("RGB")) for p in jpegs]))
    theirs = logits.argmax(1).tolist()
    top2 = logits.topk(2, dim=1).values
    margins = ", ".join(f"{m:.2f}" for m in (top2[:, 0] - top2[:, 1]).tolist())
    print(f"{name}_finetune predict on {len(jpegs)} JPEGs: crema top-1 {ours}, torchvision {theirs} "
          f"(torchvision's top-1 margins {margins})", flush=True)
    assert ours == theirs, f"crema predict's top-1 {ours} differs from torchvision's {theirs}"


def check_missing(crema, name):
    config = os.path.join(ROOT, "configs", "zoo", f"{name}.yaml")
    built = subprocess.run([crema, "summary", config], capture_output=True, text=True)
    assert built.returncode != 0, (f"{name} builds now: remove it from EXPECTED_MISSING in "
                                   f"{os.path.relpath(__file__, ROOT)} to check its logits")
    shapes = {key: tuple(value.shape) for key, value in
              getattr(torchvision.models, name)(weights=None).state_dict().items()}
    layers = {layer: (type_, keys) for layer, type_, keys in layers_of(name)}
    for key in shapes:
        assert key.rsplit(".", 1)[0] in layers, f"{name}: no layer for torchvision's {key}"
    for layer, (type_, keys) in layers.items():
        if type_ in ("Convolution", "InnerProduct"):
            outputs = shapes[f"{layer}.weight"][0]
            assert keys["num_output"] == outputs, f"{name}: {layer} has {outputs} outputs"
    print(f"{name}: {len(shapes)} state_dict names match; the logits wait for "
          f"{EXPECTED_MISSING[name]}: {built.stderr.strip().splitlines()[-1].split(';')[0]}")


def check_onnx(crema, config, weights, x, ours, logits_blob, work):
    """`crema export --onnx` of the net; onnxruntime's logits on the same input must equal
    crema's within TOLERANCE (relative to max |crema|). Returns the error as text."""
    if onnxruntime is None:
        return "not checked (no onnxruntime)"
    model = os.path.join(work, "net.onnx")
    subprocess.run([crema, "export", config, "--weights", weights, "--onnx", model], check=True,
                   stdout=subprocess.DEVNULL)
    session = onnxruntime.InferenceSession(model, providers=["CPUExecutionProvider"])
    (logits,) = session.run([logits_blob], {session.get_inputs()[0].name: x.numpy()})
    os.remove(model)
    error = (abs(torch.from_numpy(logits) - ours).max() / ours.abs().max()).item()
    assert error <= TOLERANCE, f"onnxruntime differs from crema by {error:.2e} (> {TOLERANCE})"
    return f"{error:.2e}"


def main():
    global DEVICE
    crema = os.path.abspath(sys.argv[1] if len(sys.argv) > 1 else "build/bin/crema")
    names = sys.argv[2:]
    if names[:1] == ["--device"]:
        DEVICE, names = names[1], names[2:]
    names = names or list(ARCHITECTURES)
    torch.set_num_threads(2)
    with tempfile.TemporaryDirectory(prefix="crema_zoo_") as work:
        folder = os.path.join(work, "images")
        images = write_images(folder)
        for name in names:
            if name in EXPECTED_MISSING:
                check_missing(crema, name)
            else:
                check(crema, name, images, folder, work)
                subprocess.run([crema, "summary", os.path.join(ROOT, "configs", "zoo",
                                                               f"{name}_finetune.yaml")],
                               check=True, stdout=subprocess.DEVNULL)
    print("PASSED")


if __name__ == "__main__":
    try:
        main()
    except (AssertionError, subprocess.CalledProcessError, RuntimeError) as e:
        print(f"FAILED: {type(e).__name__}: {e}")
        sys.exit(1)
