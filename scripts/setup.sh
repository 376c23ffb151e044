#!/usr/bin/env bash
# Installs what crema needs on Debian/Ubuntu (skipping what is already there) and builds it.
# Used by demo.sh and test.sh; safe to run again. BUILD_DIR (default build) picks the build tree.
set -euo pipefail
cd "$(dirname "$0")/.."

packages=(build-essential cmake libeigen3-dev libyaml-cpp-dev libcli11-dev libstb-dev libgtest-dev
          zlib1g-dev libfmt-dev nlohmann-json3-dev libzip-dev dataset-fashion-mnist gnuplot-nox
          libonnx-dev libprotobuf-dev)
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "setup: installing ${missing[*]}"
  sudo=""
  [ "$(id -u)" -eq 0 ] || sudo="sudo"
  $sudo apt-get update -q
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -q "${missing[@]}"
fi

build=${BUILD_DIR:-build}
cmake -S . -B "$build" -DCMAKE_BUILD_TYPE=Release
cmake --build "$build" -j"$(nproc)"
