// Flat pack and unpack, CPU: kernels::cpu::cast once per slice (the host conversions of
// core/float16.h), so the bits are cast's; also the reference of the CUDA path.
#include "kernels/cast/cast.h"
#include "kernels/cast/flat.h"

namespace crema::kernels::cpu {
namespace {

// Element `offset` of the flat buffer of `dtype` at `flat`.
const void* place(const void* flat, DType dtype, int64_t offset) {
  return static_cast<const char*>(flat) + size_t(offset) * dtype_size(dtype);
}

}  // namespace

void pack_flat(const FlatSlice* slices, int count, DType dtype, void* flat, int num_threads) {
  for (int k = 0; k < count; ++k) {
    const FlatSlice& s = slices[k];
    if (s.n <= 0) continue;
    cast(s.n, DType::f32, s.tensor, dtype, const_cast<void*>(place(flat, dtype, s.offset)),
         num_threads);
  }
}

void unpack_flat(const void* flat, DType dtype, const FlatSlice* slices, int count,
                 int num_threads) {
  for (int k = 0; k < count; ++k) {
    const FlatSlice& s = slices[k];
    if (s.n <= 0) continue;
    cast(s.n, dtype, place(flat, dtype, s.offset), DType::f32, s.tensor, num_threads);
  }
}

}  // namespace crema::kernels::cpu
