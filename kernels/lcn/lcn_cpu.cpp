// Divisive / local contrast normalization, CPU: the per-element formulas of lcn_math.h in
// OpenMP loops over the elements (each element's window summed by one thread in a fixed order:
// the same bits for every thread count). The backward and the LCN run their passes through the
// scratch, one parallel loop each.
#include "kernels/lcn/lcn.h"
#include "kernels/lcn/lcn_math.h"

namespace crema::kernels::cpu {
namespace {

// Below this many window loads one thread is faster: a parallel region costs a few microseconds.
constexpr int64_t kParallelLoads = 1 << 13;

bool parallel(const LcnShape& s, const LcnParams& p) {
  return s.numel() * p.local_size * p.local_size >= kParallelLoads;
}

void box_mean(const LcnShape& s, const LcnParams& p, const float* v, float* out, int num_threads) {
  const int64_t n = s.numel();
#pragma omp parallel for num_threads(num_threads) schedule(static) if (parallel(s, p))
  for (int64_t e = 0; e < n; ++e) out[e] = detail::lcn_box_mean(s, p, v, e);
}

}  // namespace

void divnorm_forward(const LcnShape& s, const LcnParams& p, float alpha, const float* x,
                     const float* means, float beta, float* y, int num_threads) {
  const int64_t n = s.numel();
#pragma omp parallel for num_threads(num_threads) schedule(static) if (parallel(s, p))
  for (int64_t e = 0; e < n; ++e) {
    y[e] = detail::lcn_blend(alpha, detail::divnorm_at(s, p, x, means, e), beta, y[e]);
  }
}

void divnorm_backward(const LcnShape& s, const LcnParams& p, float alpha, const float* x,
                      const float* means, const float* dy, float beta, float* dx, float* dmeans,
                      float* scratch, int num_threads) {
  const int64_t n = s.numel();
  float* inv = scratch;
  float* u = scratch + n;
#pragma omp parallel num_threads(num_threads) if (parallel(s, p))
  {
#pragma omp for schedule(static)
    for (int64_t e = 0; e < n; ++e) detail::divnorm_backward_prepare(s, p, x, means, dy, inv, u, e);
#pragma omp for schedule(static)
    for (int64_t e = 0; e < n; ++e) {
      const double dt = detail::divnorm_backward_dt(s, p, x, means, dy, inv, u, e);
      dx[e] = detail::lcn_blend(alpha, dt, beta, dx[e]);
      if (dmeans) dmeans[e] = detail::lcn_blend(alpha, -dt, beta, dmeans[e]);
    }
  }
}

void lcn_forward(const LcnShape& s, const LcnParams& p, float alpha, const float* x, float beta,
                 float* y, float* scratch, int num_threads) {
  box_mean(s, p, x, scratch, num_threads);
  divnorm_forward(s, p, alpha, x, scratch, beta, y, num_threads);
}

void lcn_backward(const LcnShape& s, const LcnParams& p, float alpha, const float* x,
                  const float* dy, float beta, float* dx, float* scratch, int num_threads) {
  const int64_t n = s.numel();
  float* means = scratch;
  float* dt = scratch + n;
  box_mean(s, p, x, means, num_threads);
  divnorm_backward(s, p, 1.0f, x, means, dy, 0.0f, dt, nullptr, scratch + 2 * n, num_threads);
#pragma omp parallel for num_threads(num_threads) schedule(static) if (parallel(s, p))
  for (int64_t e = 0; e < n; ++e) {
    dx[e] =
        detail::lcn_blend(alpha, double(dt[e]) - detail::lcn_box_mean(s, p, dt, e), beta, dx[e]);
  }
}

}  // namespace crema::kernels::cpu
