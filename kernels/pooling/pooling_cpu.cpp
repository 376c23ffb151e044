// 2-D pooling, fast CPU path.
//
// Work is split over OpenMP threads by (n, c) planes: forward and backward then never share an
// output element between threads (no atomics, results independent of the thread count). Window
// bounds are computed once per call rather than once per output.
//
// Forward, per output row p, the columns q split into borders (windows clipped by the left or
// right edge: the reference's scalar loop) and an interior [lo, hi) whose windows lie inside
// [0, W). There tap (h, s) of column q reads x[h, q*stride_w - pad_w + s], an affine function of
// q, so one vector loop over q applies a tap to every interior column at once, the taps taken in
// the window's row-major order: the same comparisons (and the same sums, in the same order) as
// the reference, so results are bitwise equal, ties and NaN included.
//
// Making the max loop vectorize took care (GCC 12, default -ftrapping-math): an ordered float
// compare `v > m` may trap, so GCC will not turn it into a vector select and keeps a branch that
// mispredicts on random data. The quiet compares __builtin_isgreater / __builtin_isunordered do
// not trap; the candidate index is integer arithmetic (an int -> float conversion may raise
// "inexact" and would be kept behind the branch too); and every value the select chooses between
// is loaded before it, so nothing is left to execute conditionally.
#include "kernels/pooling/pooling.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <utility>
#include <vector>

#include "core/error.h"

namespace crema::kernels::cpu {
namespace {

// One window along one axis: [start, end) clipped to the input, and the extent the average
// divides by: clipped to the padded input (count_include_pad) or to the input.
struct Span {
  int64_t start, end, size;
};

std::vector<Span> spans(int64_t outputs, int64_t in, int64_t kernel, int64_t stride, int64_t pad,
                        bool count_include_pad) {
  std::vector<Span> result;
  result.reserve(static_cast<size_t>(outputs));
  for (int64_t o = 0; o < outputs; ++o) {
    const int64_t lo = o * stride - pad, hi = std::min(lo + kernel, in + pad);
    const int64_t start = std::max<int64_t>(lo, 0), end = std::min(hi, in);
    result.push_back({start, end, count_include_pad ? hi - lo : end - start});
  }
  return result;
}

// Planes of H*W elements below this many in total are pooled on one thread: a parallel region
// costs a few microseconds, more than the work.
constexpr int64_t kParallelElements = 1 << 15;

// The output columns [lo, hi) whose windows lie entirely inside [0, W):
// q*stride - pad >= 0 and q*stride - pad + kernel <= W.
std::pair<int64_t, int64_t> interior_columns(const Pool2dGeometry& g) {
  const int64_t lo = std::min(g.Q, (g.pad_w + g.stride_w - 1) / g.stride_w);
  const int64_t last_start = g.W - g.kernel_w + g.pad_w;  // largest q*stride that fits
  const int64_t hi = last_start < 0 ? 0 : std::min(g.Q, last_start / g.stride_w + 1);
  return {lo, std::max(lo, hi)};
}

// One output of row p (rows r), the reference's loop.
void pool_one(const Pool2dGeometry& g, PoolMode mode, const float* xp, const Span& r, const Span& c,
              float* y, float* argmax) {
  if (mode == PoolMode::max) {
    int64_t best = r.start * g.W + c.start;
    float m = xp[best];
    for (int64_t h = r.start; h < r.end; ++h) {
      for (int64_t w = c.start; w < c.end; ++w) {
        const float v = xp[h * g.W + w];
        if (v > m || (std::isnan(v) && !std::isnan(m))) {  // larger, or the first NaN
          m = v;
          best = h * g.W + w;
        }
      }
    }
    *y = m;
    if (argmax != nullptr) *argmax = float(best);
    return;
  }
  float sum = 0.0f;
  for (int64_t h = r.start; h < r.end; ++h) {
    for (int64_t w = c.start; w < c.end; ++w) sum += xp[h * g.W + w];
  }
  *y = sum / float(r.size * c.size);
}

// The interior columns [lo, hi) of row p, a tap at a time. y and argmax point at row p's outputs
// [Q]; best is scratch [Q].
void pool_interior(const Pool2dGeometry& g, PoolMode mode, const float* xp, const Span& r,
                   int64_t lo, int64_t hi, float* y, float* argmax, int32_t* best) {
  const int64_t sw = g.stride_w;
  for (int64_t h = r.start; h < r.end; ++h) {
    for (int64_t s = 0; s < g.kernel_w; ++s) {
      const int64_t offset = h * g.W - g.pad_w + s;  // tap (h, s) of column q: xp[offset + q*sw]
      const float* tap = xp + offset;
      const bool first = h == r.start && s == 0;
      if (mode == PoolMode::average) {
#pragma omp simd
        for (int64_t q = lo; q < hi; ++q) y[q] = (first ? 0.0f : y[q]) + tap[q * sw];
      } else if (first) {
#pragma omp simd
        for (int64_t q = lo; q < hi; ++q) {
          y[q] = tap[q * sw];
          best[q] = int32_t(offset + q * sw);
        }
      } else {
#pragma omp simd
        for (int64_t q = lo; q < hi; ++q) {
          const float v = tap[q * sw], m = y[q];
          const int32_t b = best[q], candidate = int32_t(offset + q * sw);
          const bool take = __builtin_isgreater(v, m) |
                            (__builtin_isunordered(v, v) & !__builtin_isunordered(m, m));
          y[q] = take ? v : m;
          best[q] = take ? candidate : b;
        }
      }
    }
  }
  if (mode == PoolMode::average) {
    const float size = float(r.size * g.kernel_w);  // interior windows: kernel_w columns
#pragma omp simd
    for (int64_t q = lo; q < hi; ++q) y[q] /= size;
  } else if (argmax != nullptr) {
#pragma omp simd
    for (int64_t q = lo; q < hi; ++q) argmax[q] = float(best[q]);
  }
}

}  // namespace

void pool2d_forward(const Pool2dGeometry& g, PoolMode mode, const float* x, float* y, float* argmax,
                    int num_threads) {
  CREMA_CHECK(g.H * g.W <= INT32_MAX, "pool2d_forward: plane indices must fit in int32");
  const std::vector<Span> rows =
      spans(g.P, g.H, g.kernel_h, g.stride_h, g.pad_h, g.count_include_pad);
  const std::vector<Span> cols =
      spans(g.Q, g.W, g.kernel_w, g.stride_w, g.pad_w, g.count_include_pad);
  const std::pair<int64_t, int64_t> interior = interior_columns(g);
  const int64_t lo = interior.first, hi = interior.second;  // plain names: OpenMP captures them
  const int64_t planes = g.N * g.C;
  const bool parallel = planes * g.H * g.W >= kParallelElements;
#pragma omp parallel num_threads(std::max(1, num_threads)) if (parallel)
  {
    std::vector<int32_t> best(static_cast<size_t>(g.Q));
#pragma omp for schedule(static)
    for (int64_t plane = 0; plane < planes; ++plane) {
      const float* xp = x + plane * g.H * g.W;  // [H, W]
      for (int64_t p = 0; p < g.P; ++p) {
        const Span& r = rows[size_t(p)];
        float* yrow = y + (plane * g.P + p) * g.Q;  // [Q]
        float* arow = argmax != nullptr ? argmax + (plane * g.P + p) * g.Q : nullptr;
        auto border = [&](int64_t q) {
          pool_one(g, mode, xp, r, cols[size_t(q)], yrow + q, arow != nullptr ? arow + q : nullptr);
        };
        for (int64_t q = 0; q < lo; ++q) border(q);
        pool_interior(g, mode, xp, r, lo, hi, yrow, arow, best.data());
        for (int64_t q = hi; q < g.Q; ++q) border(q);
      }
    }
  }
}

void pool2d_backward(const Pool2dGeometry& g, PoolMode mode, const float* dy, const float* argmax,
                     float* dx, int num_threads) {
  const std::vector<Span> rows =
      spans(g.P, g.H, g.kernel_h, g.stride_h, g.pad_h, g.count_include_pad);
  const std::vector<Span> cols =
      spans(g.Q, g.W, g.kernel_w, g.stride_w, g.pad_w, g.count_include_pad);
  const int64_t planes = g.N * g.C;
#pragma omp parallel for schedule(static) \
    num_threads(std::max(1, num_threads)) if (planes * g.H * g.W >= kParallelElements)
  for (int64_t plane = 0; plane < planes; ++plane) {
    const float* dyp = dy + plane * g.P * g.Q;  // [P, Q]
    float* dxp = dx + plane * g.H * g.W;        // [H, W]
    std::memset(dxp, 0, sizeof(float) * size_t(g.H * g.W));
    if (mode == PoolMode::max) {
      const float* ap = argmax + plane * g.P * g.Q;
      for (int64_t i = 0; i < g.P * g.Q; ++i) dxp[int64_t(ap[i])] += dyp[i];
      continue;
    }
    for (int64_t p = 0; p < g.P; ++p) {
      const Span r = rows[size_t(p)];
      for (int64_t q = 0; q < g.Q; ++q) {
        const Span c = cols[size_t(q)];
        const float share = dyp[p * g.Q + q] / float(r.size * c.size);
        for (int64_t h = r.start; h < r.end; ++h) {
          for (int64_t w = c.start; w < c.end; ++w) dxp[h * g.W + w] += share;
        }
      }
    }
  }
}

}  // namespace crema::kernels::cpu
