// Flat pack and unpack: many float32 tensors gathered into one flat buffer, converted to the
// buffer's dtype, and scattered back (torch's _flatten_dense_tensors / _unflatten_dense_tensors
// with a cast, as DDP's bucket copies). Data parallelism packs each gradient bucket before its
// all-reduce and unpacks it after (apps/distributed/gradient_reducer.h): one launch per bucket
// each way instead of one copy or conversion per parameter.
//
//   pack_flat:    flat[offset_k + i] = to_dtype(tensor_k[i])     i < n_k, for every slice k
//   unpack_flat:  tensor_k[i] = to_f32(flat[offset_k + i])
//
// The flat buffer is f32, bf16 or f16; the conversions are kernels::cast's (cast.h: to nearest
// even from the f32 value, NaN to the quiet NaN of its sign; widening is exact), so the bits are
// those of one cast per tensor. An f32 buffer is a copy. Elements of the buffer that no slice
// covers (padding between slices) are left as they are.
#pragma once

#include <cstdint>
#include <vector>

#include "core/context.h"
#include "core/cuda_runtime.h"
#include "core/tensor.h"

namespace crema::kernels {

// One tensor's part of a flat buffer: its n float32 elements at `tensor` (host for cpu::,
// device for cuda::; read by pack, written by unpack) are elements [offset, offset + n) of it.
// Slices with n = 0 are skipped; the slices of one call must not overlap in the buffer.
struct FlatSlice {
  float* tensor;
  int64_t offset;
  int64_t n;
};

namespace cpu {
// kernels::cpu::cast per slice (so also the reference), each on up to `num_threads` threads.
void pack_flat(const FlatSlice* slices, int count, DType dtype, void* flat, int num_threads);
void unpack_flat(const void* flat, DType dtype, const FlatSlice* slices, int count,
                 int num_threads);
}  // namespace cpu

namespace cuda {
// One launch per kMaxFlatSlicesPerLaunch non-empty slices, passed by value in the kernel's
// parameters (1.8 KB of the 4 KB they may hold), each owning a range of blocks
// (kernels/common/slice_blocks_cuda.cuh). 64, not the optimizers' 32: a bucket of the
// Fashion-MNIST ResNet holds 40 gradients, and one launch each way is the point. A slice
// whose tensor and place in the buffer are both 16-byte aligned moves 8 elements per thread and
// step through 16-byte accesses (its n % 8 last ones one at a time); any other slice goes one
// element at a time. Nothing is allocated or read back: a CUDA graph can capture it.
constexpr int kMaxFlatSlicesPerLaunch = 64;
void pack_flat(const FlatSlice* slices, int count, DType dtype, void* flat, gpu::Stream stream);
void unpack_flat(const void* flat, DType dtype, const FlatSlice* slices, int count,
                 gpu::Stream stream);
}  // namespace cuda

// Tensor level: `tensors` float32 (any shapes) and `flat` (any shape, its elements in order), all
// on the context's device; tensor k at element offsets[k] of flat. crema::Error naming the op and
// the tensor when a tensor is not f32 on the device, flat's dtype is not f32, bf16 or f16, a slice
// falls outside flat, or two slices overlap.
void pack_flat(Context& ctx, const std::vector<const Tensor*>& tensors,
               const std::vector<int64_t>& offsets, Tensor& flat);
void unpack_flat(Context& ctx, const Tensor& flat, const std::vector<int64_t>& offsets,
                 const std::vector<Tensor*>& tensors);

}  // namespace crema::kernels
