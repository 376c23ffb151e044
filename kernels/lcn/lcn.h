// Divisive normalization and local contrast normalization (cuDNN's
// cudnnDivisiveNormalizationForward / Backward; Jarrett et al. 2009, "What is the best multi-stage
// architecture for object recognition?", section 2's local contrast normalization).
//
// x, y [N, C, H, W]; a window is the n x n spatial square centred on (h, w), n = local_size odd,
// positions outside the image counting as zero (the divisor stays n^2). With t = x - means
// (means an input: cuDNN's CUDNN_DIVNORM_PRECOMPUTED_MEANS; null means zero):
//
//   divisive normalization:  d[p] = k + alpha_n / n^2 * sum_{q in window(p)} t[q]^2
//                            y[p] = alpha * t[p] * d[p]^-beta_n + beta * y[p]
//   local contrast normalization: the same with means = box(x), the plain (Gaussian-free) window
//       mean box(v)[p] = 1/n^2 * sum_{q in window(p)} v[q]: subtractive then divisive
//       normalization, y = (x - box(x)) / (k + alpha_n * box((x - box(x))^2))^beta_n.
//
// With alpha_n = 1, beta_n = 1/2 and small k, d^-beta_n divides by the local standard deviation.
// (alpha_n, beta_n, k, n are cuDNN's lrnAlpha, lrnBeta, lrnK, lrnN; alpha, beta the output blend,
// out read only when beta != 0.)
//
// Backward, from g = dy: the window is symmetric, so q in window(p) iff p in window(q), and
//   dt[q] = g[q] d[q]^-beta_n - (2 alpha_n beta_n / n^2) t[q] sum_{p in window(q)} g[p] t[p]
//   d[p]^(-beta_n-1) divisive: dx = alpha * dt + beta * dx,  dmeans = alpha * (-dt) + beta * dmeans
//   (t = x - m); LCN: x enters t directly and through box(x), whose adjoint is box itself
//   (symmetric window,
//       fixed divisor): dx = alpha * (dt - box(dt)) + beta * dx.
#pragma once

#include <cstdint>

#include "core/context.h"
#include "core/cuda_runtime.h"
#include "core/tensor.h"
#include "kernels/common/host_device.h"

namespace crema::kernels {

struct LcnParams {
  int local_size = 5;   // n, odd: the window is n x n
  double alpha = 1e-4;  // alpha_n (cuDNN's lrnAlpha; cudnnCreateLRNDescriptor's defaults)
  double beta = 0.75;   // beta_n
  double k = 2.0;
};

struct LcnShape {
  int64_t N, C, H, W;
  CREMA_HOST_DEVICE int64_t numel() const { return N * C * H * W; }
};

// Scratch (floats) each fast path needs, a multiple of x's elements: divnorm_backward 2 (d^-beta_n
// and g t d^(-beta_n-1)), lcn_forward 1 (the means), lcn_backward 4 (means, dt and the two).
constexpr int64_t kDivnormBackwardScratch = 2;
constexpr int64_t kLcnForwardScratch = 1;
constexpr int64_t kLcnBackwardScratch = 4;

namespace ref {
// The definitions above in plain loops; the oracle of the tests (float and double). means and
// dmeans may be null.
template <class T>
void divnorm_forward(const LcnShape& s, const LcnParams& p, T alpha, const T* x, const T* means,
                     T beta, T* y);
template <class T>
void divnorm_backward(const LcnShape& s, const LcnParams& p, T alpha, const T* x, const T* means,
                      const T* dy, T beta, T* dx, T* dmeans);
template <class T>
void lcn_forward(const LcnShape& s, const LcnParams& p, T alpha, const T* x, T beta, T* y);
template <class T>
void lcn_backward(const LcnShape& s, const LcnParams& p, T alpha, const T* x, const T* dy, T beta,
                  T* dx);
}  // namespace ref

namespace cpu {
// OpenMP over the (n, c) planes; window sums in double over the clamped window. `scratch` holds
// the k...Scratch multiple of s.numel() floats.
void divnorm_forward(const LcnShape& s, const LcnParams& p, float alpha, const float* x,
                     const float* means, float beta, float* y, int num_threads);
void divnorm_backward(const LcnShape& s, const LcnParams& p, float alpha, const float* x,
                      const float* means, const float* dy, float beta, float* dx, float* dmeans,
                      float* scratch, int num_threads);
void lcn_forward(const LcnShape& s, const LcnParams& p, float alpha, const float* x, float beta,
                 float* y, float* scratch, int num_threads);
void lcn_backward(const LcnShape& s, const LcnParams& p, float alpha, const float* x,
                  const float* dy, float beta, float* dx, float* scratch, int num_threads);
}  // namespace cpu

namespace cuda {
// One thread per element sums its window (neighbouring threads read neighbouring positions:
// coalesced, the overlap served by L1/L2); the backward is two passes through the scratch, the
// LCN adds a box-mean pass before (forward) and after (backward). No atomics.
void divnorm_forward(const LcnShape& s, const LcnParams& p, float alpha, const float* x,
                     const float* means, float beta, float* y, gpu::Stream stream);
void divnorm_backward(const LcnShape& s, const LcnParams& p, float alpha, const float* x,
                      const float* means, const float* dy, float beta, float* dx, float* dmeans,
                      float* scratch, gpu::Stream stream);
void lcn_forward(const LcnShape& s, const LcnParams& p, float alpha, const float* x, float beta,
                 float* y, float* scratch, gpu::Stream stream);
void lcn_backward(const LcnShape& s, const LcnParams& p, float alpha, const float* x,
                  const float* dy, float beta, float* dx, float* scratch, gpu::Stream stream);
}  // namespace cuda

// Tensor level: 4-D f32 tensors (CPU or CUDA) or f64 on the CPU (the reference), all of x's shape;
// `means` and `dmeans` may be undefined (means zero / no gradient wanted). Outputs may not share
// storage with inputs (windows read neighbours). crema::Error names the tensor or parameter.
void divnorm_forward(Context& ctx, const LcnParams& p, double alpha, const Tensor& x,
                     const Tensor& means, double beta, Tensor& y);
void divnorm_backward(Context& ctx, const LcnParams& p, double alpha, const Tensor& x,
                      const Tensor& means, const Tensor& dy, double beta, Tensor& dx,
                      Tensor& dmeans);
void lcn_forward(Context& ctx, const LcnParams& p, double alpha, const Tensor& x, double beta,
                 Tensor& y);
void lcn_backward(Context& ctx, const LcnParams& p, double alpha, const Tensor& x, const Tensor& dy,
                  double beta, Tensor& dx);

}  // namespace crema::kernels
