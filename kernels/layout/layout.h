// Layout transforms: NCHW <-> NHWC and general axis permutations.
//
//   batched transpose:  y[b, s, r] = x[b, r, s]                  x [B, R, S] -> y [B, S, R]
//       NCHW -> NHWC is B = N, R = C, S = H*W;   NHWC -> NCHW is B = N, R = H*W, S = C.
//   permute:            y[i_0, ..., i_{d-1}] = x[j_0, ..., j_{d-1}]  with  j_{order[k]} = i_k
//       y's extent k is x's extent order[k]: PyTorch's x.permute(order), Caffe-SSD's Permute.
//
// The Tensor-level permute first simplifies the permutation (simplify_permutation): axes of
// extent 1 are dropped and input axes that stay adjacent and in order are merged, so [0, 2, 3, 1]
// on [N, C, H, W] becomes [0, 2, 1] on [N, C, H*W]. What is left is the identity (a copy), a
// batched transpose ([1, 0] or [0, 2, 1]: the fast tiled kernels) or a general permutation (one
// index walk per element: correct for any order, slower). A permutation's backward is the
// permutation by the inverse order. y never aliases x.
#pragma once

#include <cstdint>
#include <vector>

#include "core/context.h"
#include "core/cuda_runtime.h"
#include "core/tensor.h"

namespace crema::kernels {

// A permutation after simplification: `shape` is the merged input shape, `order` the merged
// order (same length). A plan of one axis is the identity: y is a copy of x.
struct PermutePlan {
  Shape shape;
  std::vector<int> order;
};

// Throws crema::Error unless `order` is a permutation of [0, ndim).
void check_permutation(const std::vector<int>& order, int ndim, const char* op);
// y's shape: y.dim(k) = x.dim(order[k]).
Shape permuted_shape(const Shape& x_shape, const std::vector<int>& order);
// order^-1: inverse[order[k]] = k (the backward's order).
std::vector<int> inverse_permutation(const std::vector<int>& order);
PermutePlan simplify_permutation(const Shape& x_shape, const std::vector<int>& order);

namespace ref {
// Plain loops over the definitions; the oracle of the tests. Explicitly instantiated for float
// and double. permute takes x's shape and the order, both of `ndim` entries.
template <class T>
void batched_transpose(int64_t B, int64_t R, int64_t S, const T* x, T* y);
template <class T>
void permute(int ndim, const int64_t* x_shape, const int* order, const T* x, T* y);
}  // namespace ref

namespace cpu {
// Batched transpose in 32 x 32 blocks (one block's rows of y stay in cache while it is written),
// blocks spread over OpenMP threads. General permute: an odometer over y's indices, the innermost
// axis walked with x's stride. Both copy values, so they equal the reference bit for bit.
void batched_transpose(int64_t B, int64_t R, int64_t S, const float* x, float* y, int num_threads);
void permute(int ndim, const int64_t* x_shape, const int* order, const float* x, float* y,
             int num_threads);
}  // namespace cpu

namespace cuda {
// naive: one thread per y element reading x with stride R (writes coalesced, reads not);
// tiled: a 32 x 32 tile staged through shared memory padded to 33 columns, so that both the
// global reads and the global writes are coalesced and the transposed shared-memory reads hit 32
// different banks. See README.md.
enum class TransposeVersion { naive, tiled, best = tiled };
// The most axes a CUDA general permutation takes after simplification.
constexpr int kMaxPermuteAxes = 8;

void batched_transpose(int64_t B, int64_t R, int64_t S, const float* x, float* y,
                       TransposeVersion version, gpu::Stream stream);
// tiled, blending: y[b, s, r] = alpha * x[b, r, s] + beta * y[b, s, r], y not read when beta is 0
// (kernels/tensor_ops' transform_tensor on an NCHW <-> NHWC permutation).
void batched_transpose(int64_t B, int64_t R, int64_t S, float alpha, const float* x, float beta,
                       float* y, gpu::Stream stream);
// One thread per y element (coalesced writes, gathered reads). ndim <= kMaxPermuteAxes.
void permute(int ndim, const int64_t* x_shape, const int* order, const float* x, float* y,
             gpu::Stream stream);
}  // namespace cuda

// Tensor level: float32 tensors (or float64 on the CPU, which runs ref::) on the context's device;
// crema::Error naming the tensor when a shape, dtype or device is wrong, or the order is not a
// permutation. x [N, C, H, W] -> y [N, H, W, C].
void nchw_to_nhwc(Context& ctx, const Tensor& x, Tensor& y);
// x [N, H, W, C] -> y [N, C, H, W].
void nhwc_to_nchw(Context& ctx, const Tensor& x, Tensor& y);
// y = x.permute(order), y of shape permuted_shape(x.shape(), order).
void permute(Context& ctx, const Tensor& x, const std::vector<int>& order, Tensor& y);

// ---- convert: dtype and layout at once ------------------------------------------------------
// y = x in y's dtype and y's layout (core/tensor.h), one pass over memory: what sits between a
// layer that runs bf16 channels-last and one that runs f32 channels-first (layers/convert.cpp),
// and what turns an f32 KCRS filter into the bf16 KRSC copy a channels-last convolution reads.
// x and y have one logical shape; a 4-D pair of different layouts is transposed (nchw -> nhwc:
// y[n, h, w, c] = x[n, c, h, w]), any other pair copied element by element; values are rounded as
// kernels::cast rounds them (to nearest even, through f32). accumulate: y += x instead (y f32:
// a KRSC filter gradient added into its KCRS master; or f64 on the CPU, for the layers' gradient
// checks). Dtypes: f32, bf16, f16 on both devices, f64 on the CPU; y never aliases x.
void convert(Context& ctx, const Tensor& x, Tensor& y, bool accumulate = false);

namespace cpu {
// The reference and CPU path of convert: B batches of an R x S matrix, y[b, s, r] = x[b, r, s]
// (R = 1 or S = 1: a plain copy), converted through double; y += when accumulate.
void convert(int64_t B, int64_t R, int64_t S, DType from, const void* x, DType to, void* y,
             bool accumulate, int num_threads);
}  // namespace cpu

namespace cuda {
// The same on the GPU (f32, bf16, f16): 32 x 32 tiles through shared memory as transpose_tiled,
// converted through float (exact for the 16-bit types) at the load and rounded once at the store.
void convert(int64_t B, int64_t R, int64_t S, DType from, const void* x, DType to, void* y,
             bool accumulate, gpu::Stream stream);
}  // namespace cuda

}  // namespace crema::kernels
