// Concatenation of tensors along one axis, and its inverse, the slice.
//
// A tensor [A_0, ..., A_{axis-1}, K, A_{axis+1}, ...] is viewed as [outer, K, inner]: outer is
// the product of the extents before the axis, inner of those after it. Parts p = 0..P-1 have
// extents K_p along the axis, K = K_0 + ... + K_{P-1}, and part p starts at k_p = K_0 + ... +
// K_{p-1} in the whole:
//   concat:  whole[o, k_p + k, i] = part_p[o, k, i]      for k < K_p
//   slice:   part_p[o, k, i] = whole[o, k_p + k, i]
// Each is the other's backward: concat's dL/dpart_p is the slice of dL/dwhole, and slice's
// dL/dwhole is the concat of the dL/dpart_p. Pure copies: every path gives the same bits.
#pragma once

#include <cstdint>
#include <vector>

#include "core/context.h"
#include "core/cuda_runtime.h"
#include "core/tensor.h"

namespace crema::kernels {

namespace ref {
// Plain loops over the definitions; `extents` holds K_p for the `num_parts` parts. In slice a
// null part is skipped (nobody wants it; in concat, its place in the whole already holds it: a
// window, core/VIEWS.md). Explicitly instantiated for float and double.
template <class T>
void concat(int64_t outer, int64_t inner, int num_parts, const int64_t* extents,
            const T* const* parts, T* whole);
template <class T>
void slice(int64_t outer, int64_t inner, int num_parts, const int64_t* extents, const T* whole,
           T* const* parts);
}  // namespace ref

namespace cpu {
// The same as row copies: each (part, o) pair moves K_p * inner contiguous floats, the pairs
// spread over OpenMP threads.
void concat(int64_t outer, int64_t inner, int num_parts, const int64_t* extents,
            const float* const* parts, float* whole, int num_threads);
void slice(int64_t outer, int64_t inner, int num_parts, const int64_t* extents, const float* whole,
           float* const* parts, int num_threads);
}  // namespace cpu

namespace cuda {
// per_part: one launch per part, one unit per thread; fused: up to kMaxFusedParts parts per
// launch (blockIdx.y picks the part), the same per-unit work in fewer launches. A unit is the
// widest of 16, 8, 4, 2, 1 bytes that every row and pointer allows (16 bytes: 4 floats, 8 bf16 or
// f16). T is float, bf16_t or f16_t (a copy: any dtype of its size would do).
enum class ConcatVersion { per_part, fused, best = fused };
constexpr int kMaxFusedParts = 8;
template <class T>
void concat(int64_t outer, int64_t inner, int num_parts, const int64_t* extents,
            const T* const* parts, T* whole, ConcatVersion version, gpu::Stream stream);
template <class T>
void slice(int64_t outer, int64_t inner, int num_parts, const int64_t* extents, const T* whole,
           T* const* parts, ConcatVersion version, gpu::Stream stream);
}  // namespace cuda

// Tensor level: tensors of one dtype on the context's device (f32 on CPU and CUDA, f64 on the CPU,
// which runs ref::, bf16 and f16 on CUDA),
// all of one rank, whose extents agree except along `axis` (0 <= axis < rank), where the parts'
// extents add up to the whole's. Throws crema::Error naming the part and the shapes otherwise.
// slice takes the extents K_p explicitly, so that a part nobody wants may be null (skipped) and
// still hold its place.
void concat(Context& ctx, const std::vector<const Tensor*>& parts, int axis, Tensor& whole);
// concat with the extents given, where a null part is skipped: its place in the whole is left as
// it is (a Concat whose bottom is a window of its top, a Slice's backward past a top that is a
// view of its bottom: core/VIEWS.md). Every path skips them, CUDA's too.
void concat(Context& ctx, const std::vector<const Tensor*>& parts, int axis,
            const std::vector<int64_t>& extents, Tensor& whole);
void slice(Context& ctx, const Tensor& whole, int axis, const std::vector<int64_t>& extents,
           const std::vector<Tensor*>& parts);

}  // namespace crema::kernels
