// Flat pack and unpack, CUDA: one kernel for both directions, a converting copy over up to 64
// (source, destination, n) slices per launch. The slices travel by value in the kernel's
// parameters and slice k owns blocks [first_block[k], first_block[k + 1]) (slice_blocks_cuda.cuh),
// over which it runs a grid-stride loop: 8 elements per thread and step through 16-byte loads and
// stores when both of its pointers are 16-byte aligned (as cast_cuda.cu's vectorized version),
// one element per step otherwise and for its n % 8 last elements. The conversion is cast's
// (float16_cuda.cuh: widened exactly, rounded once with cvt.rn), so the bits are cast's.
#include <algorithm>
#include <string>

#include "core/error.h"
#include "kernels/cast/flat.h"
#include "kernels/common/float16_cuda.cuh"
#include "kernels/common/launch.h"
#include "kernels/common/slice_blocks_cuda.cuh"

namespace crema::kernels::cuda {
namespace {

constexpr int kGroup = 8;  // elements per vectorized step: 16 bytes of halves, 32 of floats
// A slice gets one block per kThreads * kGroup elements (one step per thread), up to this many;
// beyond that its threads loop.
constexpr int64_t kMaxBlocksPerSlice = 4096;

int slice_blocks(int64_t n) {
  return int(std::min(kMaxBlocksPerSlice, ceil_div(n, int64_t(kThreads) * kGroup)));
}

// One slice of a launch: n elements from `from` (From) to `to` (To).
struct CopySlice {
  const void* from;
  void* to;
  int64_t n;
};

struct CopyBatch {
  CopySlice slices[kMaxFlatSlicesPerLaunch];
  int first_block[kMaxFlatSlicesPerLaunch + 1];
  int count;
};

__device__ inline bool aligned16(const void* p) {
  return (reinterpret_cast<uintptr_t>(p) & 15u) == 0;
}

template <class From, class To>
__global__ void copy_slices(const __grid_constant__ CopyBatch batch) {
  const int k = slice_of_block(batch.first_block, batch.count);
  const From* __restrict__ x = static_cast<const From*>(batch.slices[k].from);
  To* __restrict__ y = static_cast<To*>(batch.slices[k].to);
  const int64_t n = batch.slices[k].n;
  const int64_t first = (int64_t(blockIdx.x) - batch.first_block[k]) * kThreads + threadIdx.x;
  const int64_t stride = int64_t(batch.first_block[k + 1] - batch.first_block[k]) * kThreads;
  int64_t scalar_from = 0;  // where the one-element loop starts: after the groups, if any
  if (aligned16(x) && aligned16(y)) {
    const int64_t groups = n / kGroup;
    for (int64_t g = first; g < groups; g += stride) {
      float v[kGroup];
      load_floats(x, g * kGroup, v);
      store_floats(y, g * kGroup, v);
    }
    scalar_from = groups * kGroup;
  }
  for (int64_t i = scalar_from + first; i < n; i += stride) {
    y[i] = from_float<To>(to_float(x[i]));
  }
}

// Launches copy_slices over every non-empty slice, kMaxFlatSlicesPerLaunch at a time: a pack
// copies each tensor into its place in `flat` (of `dtype`), an unpack the place into the tensor.
template <class From, class To>
void launch(const FlatSlice* slices, int count, const void* flat, DType dtype, bool pack,
            gpu::Stream stream) {
  const char* op = pack ? "pack_flat" : "unpack_flat";
  const size_t element = dtype_size(dtype);
  CopyBatch batch{};
  auto flush = [&] {
    if (batch.count == 0) return;
    copy_slices<From, To><<<batch.first_block[batch.count], kThreads, 0, stream>>>(batch);
    gpu::check_launch(op);
    batch = CopyBatch{};
  };
  for (int k = 0; k < count; ++k) {
    const FlatSlice& s = slices[k];
    if (s.n <= 0) continue;
    char* place = static_cast<char*>(const_cast<void*>(flat)) + size_t(s.offset) * element;
    batch.slices[batch.count] =
        pack ? CopySlice{s.tensor, place, s.n} : CopySlice{place, s.tensor, s.n};
    batch.first_block[batch.count + 1] = batch.first_block[batch.count] + slice_blocks(s.n);
    if (++batch.count == kMaxFlatSlicesPerLaunch) flush();
  }
  flush();
}

}  // namespace

void pack_flat(const FlatSlice* slices, int count, DType dtype, void* flat, gpu::Stream stream) {
  switch (dtype) {
    case DType::f32:
      return launch<float, float>(slices, count, flat, dtype, true, stream);
    case DType::bf16:
      return launch<float, bf16_t>(slices, count, flat, dtype, true, stream);
    case DType::f16:
      return launch<float, f16_t>(slices, count, flat, dtype, true, stream);
    case DType::f64:
      break;
  }
  CREMA_CHECK(false, std::string("cuda::pack_flat into ") + dtype_name(dtype));
}

void unpack_flat(const void* flat, DType dtype, const FlatSlice* slices, int count,
                 gpu::Stream stream) {
  switch (dtype) {
    case DType::f32:
      return launch<float, float>(slices, count, flat, dtype, false, stream);
    case DType::bf16:
      return launch<bf16_t, float>(slices, count, flat, dtype, false, stream);
    case DType::f16:
      return launch<f16_t, float>(slices, count, flat, dtype, false, stream);
    case DType::f64:
      break;
  }
  CREMA_CHECK(false, std::string("cuda::unpack_flat from ") + dtype_name(dtype));
}

}  // namespace crema::kernels::cuda
