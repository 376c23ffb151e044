#!/usr/bin/env bash
# Builds the CUDA driver-API tracer (scripts/cuda_api_trace.cpp) into DIR, with the CUPTI library
# beside it, to carry to a GPU machine that has no profiler:
#
#   scripts/cuda_api_trace.sh DIR
#   CUDA_INJECTION64_PATH=DIR/libcuda_api_trace.so LD_LIBRARY_PATH=DIR:$LD_LIBRARY_PATH \
#     CUDA_API_TRACE_MS=20 build/bin/crema train ...
#
# CUPTI is not in this machine's CUDA Toolkit: its headers and library come from the
# nvidia-cuda-cupti wheel of the Toolkit's major.minor (pip download, cached in DIR/wheel).
set -euo pipefail
out=${1:?usage: scripts/cuda_api_trace.sh DIR}
cuda=${CUDA_HOME:-/usr/local/cuda}
version=$("$cuda/bin/nvcc" --version | sed -n 's/.*release \([0-9]*\.[0-9]*\).*/\1/p')
mkdir -p "$out/wheel"
if [ ! -d "$out/wheel/nvidia" ]; then
  python3 -m pip download --quiet --no-deps -d "$out/wheel" "nvidia-cuda-cupti==$version.*"
  (cd "$out/wheel" && python3 -m zipfile -e nvidia_cuda_cupti-*.whl .)
fi
cupti=$(dirname "$(find "$out/wheel/nvidia" -name cupti.h | head -1)")/..
cp "$cupti"/lib/libcupti.so.* "$out/"
g++ -O2 -std=c++17 -shared -fPIC -I"$cupti/include" -I"$cuda/include" \
  "$(dirname "$0")/cuda_api_trace.cpp" -L"$out" -l:"$(basename "$(ls "$out"/libcupti.so.* | head -1)")" \
  -Wl,-rpath,'$ORIGIN' -o "$out/libcuda_api_trace.so"
echo "built $out/libcuda_api_trace.so (CUPTI $version)"
