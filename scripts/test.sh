#!/usr/bin/env bash
# Set up, build and run the whole test suite (GPU tests skip themselves without a GPU).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
# The PyTorch interoperability test (tests/apps/pytorch_load_test.py) runs with Debian's
# /usr/bin/python3 and python3-torch; ctest reports it as skipped where torch is missing.
if ! /usr/bin/python3 -c "import torch" >/dev/null 2>&1; then
  sudo=""
  [ "$(id -u)" -eq 0 ] || sudo="sudo"
  echo "test: installing python3-torch"
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -q python3-torch ||
    { $sudo apt-get update -q && DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -q python3-torch; }
fi
ctest --test-dir "${BUILD_DIR:-build}" --output-on-failure -j"$(nproc)" "$@"
