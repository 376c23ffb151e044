#!/usr/bin/env bash
# The main job: set up, build, and train LeNet on Fashion-MNIST (on the GPU when one is present
# and this build has the CUDA backend, else on the CPU), ending with the test accuracy.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
device=cpu
if command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi -L >/dev/null 2>&1 &&
   build/bin/crema devices | grep -q "^cuda"; then
  device=cuda:0
fi
build/bin/crema train configs/lenet_fashion_mnist.yaml --device "$device" "$@"
