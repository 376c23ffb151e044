// Divisive / local contrast normalization, CUDA: one thread per element evaluates the formulas of
// lcn_math.h (grid-stride), so each pass is one kernel; the window's overlapping reads between
// neighbouring threads are served by L1/L2. No atomics: the same bits on every run.
//   forward:  [box mean ->] divnorm
//   backward: [box mean ->] prepare (d^-beta_n, g t d^(-beta_n-1)) -> dt [-> dt - box(dt)]
#include "kernels/common/launch.h"
#include "kernels/lcn/lcn.h"
#include "kernels/lcn/lcn_math.h"

namespace crema::kernels::cuda {
namespace {

constexpr int64_t kMaxBlocks = 8192;

// The elements of a grid-stride loop over s: this thread's first, and the step to the next.
__device__ inline int64_t first_element() {
  return int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
}
__device__ inline int64_t element_step() {
  return int64_t(gridDim.x) * blockDim.x;
}

__global__ void box_mean_kernel(LcnShape s, LcnParams p, const float* v, float* out) {
  for (int64_t e = first_element(); e < s.numel(); e += element_step()) {
    out[e] = detail::lcn_box_mean(s, p, v, e);
  }
}

__global__ void divnorm_forward_kernel(LcnShape s, LcnParams p, float alpha, const float* x,
                                       const float* means, float beta, float* y) {
  for (int64_t e = first_element(); e < s.numel(); e += element_step()) {
    y[e] = detail::lcn_blend(alpha, detail::divnorm_at(s, p, x, means, e), beta, y[e]);
  }
}

__global__ void prepare_kernel(LcnShape s, LcnParams p, const float* x, const float* means,
                               const float* dy, float* inv, float* u) {
  for (int64_t e = first_element(); e < s.numel(); e += element_step()) {
    detail::divnorm_backward_prepare(s, p, x, means, dy, inv, u, e);
  }
}

__global__ void dt_kernel(LcnShape s, LcnParams p, float alpha, const float* x, const float* means,
                          const float* dy, const float* inv, const float* u, float beta, float* dx,
                          float* dmeans) {
  for (int64_t e = first_element(); e < s.numel(); e += element_step()) {
    const double dt = detail::divnorm_backward_dt(s, p, x, means, dy, inv, u, e);
    dx[e] = detail::lcn_blend(alpha, dt, beta, dx[e]);
    if (dmeans) dmeans[e] = detail::lcn_blend(alpha, -dt, beta, dmeans[e]);
  }
}

__global__ void lcn_dx_kernel(LcnShape s, LcnParams p, float alpha, const float* dt, float beta,
                              float* dx) {
  for (int64_t e = first_element(); e < s.numel(); e += element_step()) {
    dx[e] =
        detail::lcn_blend(alpha, double(dt[e]) - detail::lcn_box_mean(s, p, dt, e), beta, dx[e]);
  }
}

int blocks(const LcnShape& s) {
  return blocks_for(s.numel(), kThreads, kMaxBlocks);
}

}  // namespace

void divnorm_forward(const LcnShape& s, const LcnParams& p, float alpha, const float* x,
                     const float* means, float beta, float* y, gpu::Stream stream) {
  if (s.numel() == 0) return;
  divnorm_forward_kernel<<<blocks(s), kThreads, 0, stream>>>(s, p, alpha, x, means, beta, y);
  gpu::check_launch("divnorm_forward");
}

void divnorm_backward(const LcnShape& s, const LcnParams& p, float alpha, const float* x,
                      const float* means, const float* dy, float beta, float* dx, float* dmeans,
                      float* scratch, gpu::Stream stream) {
  if (s.numel() == 0) return;
  float* inv = scratch;
  float* u = scratch + s.numel();
  prepare_kernel<<<blocks(s), kThreads, 0, stream>>>(s, p, x, means, dy, inv, u);
  dt_kernel<<<blocks(s), kThreads, 0, stream>>>(s, p, alpha, x, means, dy, inv, u, beta, dx,
                                                dmeans);
  gpu::check_launch("divnorm_backward");
}

void lcn_forward(const LcnShape& s, const LcnParams& p, float alpha, const float* x, float beta,
                 float* y, float* scratch, gpu::Stream stream) {
  if (s.numel() == 0) return;
  box_mean_kernel<<<blocks(s), kThreads, 0, stream>>>(s, p, x, scratch);
  divnorm_forward(s, p, alpha, x, scratch, beta, y, stream);
}

void lcn_backward(const LcnShape& s, const LcnParams& p, float alpha, const float* x,
                  const float* dy, float beta, float* dx, float* scratch, gpu::Stream stream) {
  if (s.numel() == 0) return;
  const int64_t n = s.numel();
  float* means = scratch;
  float* dt = scratch + n;
  box_mean_kernel<<<blocks(s), kThreads, 0, stream>>>(s, p, x, means);
  divnorm_backward(s, p, 1.0f, x, means, dy, 0.0f, dt, nullptr, scratch + 2 * n, stream);
  lcn_dx_kernel<<<blocks(s), kThreads, 0, stream>>>(s, p, alpha, dt, beta, dx);
  gpu::check_launch("lcn_backward");
}

}  // namespace crema::kernels::cuda
