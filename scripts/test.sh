#!/usr/bin/env bash
# Set up, build and run the whole test suite (GPU tests skip themselves without a GPU).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
# The PyTorch interoperability tests (tests/apps/pytorch_load_test.py, tests/zoo/zoo_logits_test.py)
# run with Debian's /usr/bin/python3, python3-torch and python3-torchvision; ctest reports them as
# skipped where these are missing.
if ! /usr/bin/python3 -c "import torch, torchvision" >/dev/null 2>&1; then
  sudo=""
  [ "$(id -u)" -eq 0 ] || sudo="sudo"
  echo "test: installing python3-torch python3-torchvision"
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -q python3-torch python3-torchvision ||
    { $sudo apt-get update -q &&
      DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -q python3-torch python3-torchvision; }
fi
# The ONNX export test (tests/apps/onnx_export_test.py) runs onnxruntime, from PyPI, in a venv over
# Debian's python3 and its packages (numpy, PIL, torch); without it ctest reports that test skipped.
venv="${BUILD_DIR:-build}/onnx-venv"
if ! "$venv/bin/python" -c "import onnxruntime" >/dev/null 2>&1; then
  sudo=""
  [ "$(id -u)" -eq 0 ] || sudo="sudo"
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -q python3-venv python3-pil python3-numpy >/dev/null ||
    { $sudo apt-get update -q && DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -q python3-venv python3-pil python3-numpy; }
  { /usr/bin/python3 -m venv --system-site-packages "$venv" && "$venv/bin/pip" install -q onnxruntime; } ||
    echo "test: onnxruntime could not be installed into $venv; the ONNX export test will be skipped"
fi
ctest --test-dir "${BUILD_DIR:-build}" --output-on-failure -j"$(nproc)" "$@"
