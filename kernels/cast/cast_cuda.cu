// Cast, CUDA: one version. A grid-stride loop over groups of 8 elements, each read and written
// through 16-byte accesses (8 halves are one access, 8 floats two), widened to float and narrowed
// with one cvt.rn (kernels/common/float16_cuda.cuh): the same bits as the CPU's conversions. The
// last n % 8 elements, or all of them when x or y is not 16-byte aligned, go one per thread. A
// cast to the same dtype copies the bits (a NaN keeps its payload, as in the CPU's memcpy).
#include <type_traits>

#include "core/error.h"
#include "kernels/cast/cast.h"
#include "kernels/common/float16_cuda.cuh"
#include "kernels/common/map_cuda.cuh"

namespace crema::kernels::cuda {
namespace {

constexpr int kGroup = 8;

template <class To, class From>
__device__ inline To convert(From v) {
  if constexpr (std::is_same_v<From, To>) {
    return v;
  } else {
    return from_float<To>(to_float(v));
  }
}

template <class From, class To>
__global__ void cast_vectorized(int64_t n, const From* __restrict__ x, To* __restrict__ y) {
  const int64_t groups = n / kGroup;
  for (int64_t g = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; g < groups;
       g += int64_t(gridDim.x) * blockDim.x) {
    if constexpr (std::is_same_v<From, To>) {
      const uint4* from = reinterpret_cast<const uint4*>(x + g * kGroup);
      uint4* to = reinterpret_cast<uint4*>(y + g * kGroup);
#pragma unroll
      for (int k = 0; k < int(kGroup * sizeof(To) / 16); ++k) to[k] = from[k];
    } else {
      float v[kGroup];
      load_floats(x, g * kGroup, v);
      store_floats(y, g * kGroup, v);
    }
  }
  const int64_t tail = n - groups * kGroup;
  if (blockIdx.x == 0 && int64_t(threadIdx.x) < tail) {
    const int64_t i = groups * kGroup + threadIdx.x;
    y[i] = convert<To>(x[i]);
  }
}

template <class From, class To>
__global__ void cast_scalar(int64_t n, const From* __restrict__ x, To* __restrict__ y) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n;
       i += int64_t(gridDim.x) * blockDim.x) {
    y[i] = convert<To>(x[i]);
  }
}

template <class From, class To>
void launch(int64_t n, const void* x, void* y, gpu::Stream stream) {
  const auto* typed_x = static_cast<const From*>(x);
  auto* typed_y = static_cast<To*>(y);
  if (detail::aligned16(x) && detail::aligned16(y)) {
    cast_vectorized<<<detail::map_blocks(n / kGroup), detail::kMapThreads, 0, stream>>>(n, typed_x,
                                                                                        typed_y);
  } else {
    cast_scalar<<<detail::map_blocks(n), detail::kMapThreads, 0, stream>>>(n, typed_x, typed_y);
  }
  gpu::check_launch("cast");
}

template <class From>
void launch_from(int64_t n, const void* x, DType to, void* y, gpu::Stream stream) {
  switch (to) {
    case DType::f32:
      return launch<From, float>(n, x, y, stream);
    case DType::bf16:
      return launch<From, bf16_t>(n, x, y, stream);
    case DType::f16:
      return launch<From, f16_t>(n, x, y, stream);
    case DType::f64:
      break;
  }
  CREMA_CHECK(false, std::string("cuda::cast to ") + dtype_name(to));
}

}  // namespace

void cast(int64_t n, DType from, const void* x, DType to, void* y, gpu::Stream stream) {
  if (n <= 0) return;
  switch (from) {
    case DType::f32:
      return launch_from<float>(n, x, to, y, stream);
    case DType::bf16:
      return launch_from<bf16_t>(n, x, to, y, stream);
    case DType::f16:
      return launch_from<f16_t>(n, x, to, y, stream);
    case DType::f64:
      break;
  }
  CREMA_CHECK(false, std::string("cuda::cast from ") + dtype_name(from));
}

}  // namespace crema::kernels::cuda
