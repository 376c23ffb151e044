#!/usr/bin/env bash
# Builds the CUPTI tools for GPU machines without Nsight into DIR, with the CUPTI library beside
# them (DIR then holds only these three files, small enough to carry to a GPU machine):
#   libcuda_api_trace.so  scripts/cuda_api_trace.cpp: driver-API calls timed per thread
#   libcupti_counters.so  scripts/cupti_counters.cpp: ncu's metrics per kernel (Range Profiler)
#
#   scripts/cupti_tools.sh DIR
#   CUDA_INJECTION64_PATH=DIR/libcuda_api_trace.so LD_LIBRARY_PATH=DIR:$LD_LIBRARY_PATH \
#     CUDA_API_TRACE_MS=20 build/bin/crema train ...
#   CUDA_INJECTION64_PATH=DIR/libcupti_counters.so LD_LIBRARY_PATH=NVLIB:DIR:$LD_LIBRARY_PATH \
#     CUPTI_COUNTERS_METRICS=gpu__time_duration.sum,dram__bytes_read.sum \
#     CUPTI_COUNTERS_OUT=counters.csv build/bin/crema_gemm_ladder --profile --rungs s1 ...
#
# The counters also need libnvperf_host.so and libnvperf_target.so, which CUPTI loads itself and
# which are too big to carry (43 MB). NVLIB: a folder holding them; on the GPU machines torch's
# wheel has them with its own libcupti.so.13 in .../site-packages/nvidia/cu13/lib, and that
# libcupti then comes first (one version of CUPTI throughout; scripts/bench/gemm_ladder.sh links
# the three into its OUT). Both libraries say what they do, and any failed CUPTI call, on stderr.
#
# CUPTI is not in this machine's CUDA Toolkit: its headers and library come from the
# nvidia-cuda-cupti wheel of the Toolkit's major.minor (pip download), kept in DIR/wheel when
# that exists, else in ~/.cache/crema. (scripts/cuda_api_trace.sh DIR runs this script.)
set -euo pipefail
out=${1:?usage: scripts/cupti_tools.sh DIR}
here=$(cd "$(dirname "$0")" && pwd)
cuda=${CUDA_HOME:-/usr/local/cuda}
version=$("$cuda/bin/nvcc" --version | sed -n 's/.*release \([0-9]*\.[0-9]*\).*/\1/p')
wheel=$out/wheel
[[ -d $wheel/nvidia ]] || wheel=${XDG_CACHE_HOME:-$HOME/.cache}/crema/cupti-$version
mkdir -p "$out" "$wheel"
if [[ ! -d $wheel/nvidia ]]; then
  python3 -m pip download --quiet --no-deps -d "$wheel" "nvidia-cuda-cupti==$version.*"
  (cd "$wheel" && python3 -m zipfile -e nvidia_cuda_cupti-*.whl .)
fi
cupti=$(dirname "$(find "$wheel/nvidia" -name cupti.h | head -1)")/..
cp "$cupti"/lib/libcupti.so.* "$out/"
libcupti=$(basename "$(ls "$out"/libcupti.so.* | head -1)")
flags=(-O2 -std=c++17 -shared -fPIC -I"$cupti/include" -I"$cuda/include")
links=(-L"$out" -l:"$libcupti" -Wl,-rpath,'$ORIGIN')
g++ "${flags[@]}" "$here/cuda_api_trace.cpp" "${links[@]}" -o "$out/libcuda_api_trace.so"
# The counters make the context current at exit (cuCtxPushCurrent): the driver's stub to link.
g++ "${flags[@]}" "$here/cupti_counters.cpp" "${links[@]}" -L"$cuda/lib64/stubs" -lcuda -ldl \
  -o "$out/libcupti_counters.so"
echo "built $out/libcuda_api_trace.so and $out/libcupti_counters.so (CUPTI $version)"
