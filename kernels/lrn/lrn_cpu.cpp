// LRN, fast CPU path. Work is done a plane (one sample and channel, H*W contiguous values) at a
// time, planes split over OpenMP threads:
//   across channels: the plane's window sum adds up to n neighbouring planes, each a contiguous,
//     vectorized loop (the reference walks the channels once per element, H*W floats apart);
//   within a channel: a separable box sum, each row's window along w, then the rows' sums along
//     h, both as vectorized loops over shifted rows (n + n adds per value instead of n^2).
// The backward first stores dy * y / scale for every element (a temporary of x's size), then
// sums it over the same windows. scale^-beta goes through square roots for the usual exponents
// (0.75, Caffe's and AlexNet's; 0.5; 1), which vectorize, and through std::pow otherwise (a
// scalar libm call, several times the cost of everything else here).
#include <algorithm>
#include <cmath>
#include <vector>

#include "kernels/lrn/lrn.h"

namespace crema::kernels::cpu {
namespace {

// Below this many elements one thread is faster: a parallel region costs a few microseconds.
constexpr int64_t kParallelElements = 1 << 15;

int threads_for(const LrnShape& s, int num_threads) {
  return s.N * s.C * s.H * s.W >= kParallelElements ? std::max(1, num_threads) : 1;
}

float window_size(const LrnParams& p) {
  const float n = float(p.local_size);
  return p.region == LrnRegion::across_channels ? n : n * n;
}

// out = sum over channels c-r .. c+r (inside [0, C)) of plane (n, c') of v, squared or not.
void channel_window(const LrnShape& s, int64_t r, const float* v, bool square, int64_t n, int64_t c,
                    float* out) {
  const int64_t plane = s.H * s.W;
  std::fill(out, out + plane, 0.0f);
  for (int64_t cc = std::max<int64_t>(0, c - r); cc <= std::min(s.C - 1, c + r); ++cc) {
    const float* src = v + (n * s.C + cc) * plane;
    if (square) {
#pragma omp simd
      for (int64_t i = 0; i < plane; ++i) out[i] += src[i] * src[i];
    } else {
#pragma omp simd
      for (int64_t i = 0; i < plane; ++i) out[i] += src[i];
    }
  }
}

// out = the (2r+1) x (2r+1) zero-padded box sum of one H x W plane (squared or not); `rows`
// holds H*W floats of scratch (each row's sum along w).
void spatial_window(const LrnShape& s, int64_t r, const float* plane, bool square, float* rows,
                    float* out) {
  const int64_t H = s.H, W = s.W;
  std::fill(rows, rows + H * W, 0.0f);
  for (int64_t h = 0; h < H; ++h) {
    const float* src = plane + h * W;
    float* dst = rows + h * W;
    for (int64_t d = -r; d <= r; ++d) {
      // dst[w] += src[w + d] for the w with 0 <= w + d < W.
      const int64_t lo = std::max<int64_t>(0, -d), hi = std::min(W, W - d);
      if (square) {
#pragma omp simd
        for (int64_t w = lo; w < hi; ++w) dst[w] += src[w + d] * src[w + d];
      } else {
#pragma omp simd
        for (int64_t w = lo; w < hi; ++w) dst[w] += src[w + d];
      }
    }
  }
  std::fill(out, out + H * W, 0.0f);
  for (int64_t h = 0; h < H; ++h) {
    float* dst = out + h * W;
    for (int64_t hh = std::max<int64_t>(0, h - r); hh <= std::min(H - 1, h + r); ++hh) {
      const float* src = rows + hh * W;
#pragma omp simd
      for (int64_t w = 0; w < W; ++w) dst[w] += src[w];
    }
  }
}

// out[i] = s[i]^(-beta) for i < n.
void pow_neg(int64_t n, const float* s, float beta, float* out) {
  if (beta == 0.75f) {
#pragma omp simd
    for (int64_t i = 0; i < n; ++i) {
      const float r = 1.0f / std::sqrt(s[i]);  // s^-0.5; s^-0.75 = s^-0.5 * (s^-0.5)^0.5
      out[i] = r * std::sqrt(r);
    }
  } else if (beta == 0.5f) {
#pragma omp simd
    for (int64_t i = 0; i < n; ++i) out[i] = 1.0f / std::sqrt(s[i]);
  } else if (beta == 1.0f) {
#pragma omp simd
    for (int64_t i = 0; i < n; ++i) out[i] = 1.0f / s[i];
  } else {
    for (int64_t i = 0; i < n; ++i) out[i] = std::pow(s[i], -beta);
  }
}

// out = window sum around plane (n, c) of v (all of x's elements), squared or not.
void window(const LrnShape& s, const LrnParams& p, const float* v, bool square, int64_t n,
            int64_t c, std::vector<float>& rows, float* out) {
  const int64_t r = (p.local_size - 1) / 2;
  if (p.region == LrnRegion::across_channels) {
    channel_window(s, r, v, square, n, c, out);
  } else {
    rows.resize(size_t(s.H * s.W));
    spatial_window(s, r, v + (n * s.C + c) * s.H * s.W, square, rows.data(), out);
  }
}

}  // namespace

void lrn_forward(const LrnShape& s, const LrnParams& p, const float* x, float* y, float* scale,
                 int num_threads) {
  const int64_t plane = s.H * s.W;
  const float coef = p.alpha / window_size(p);
#pragma omp parallel num_threads(threads_for(s, num_threads))
  {
    std::vector<float> rows;
#pragma omp for collapse(2) schedule(static)
    for (int64_t n = 0; n < s.N; ++n) {
      for (int64_t c = 0; c < s.C; ++c) {
        const int64_t base = (n * s.C + c) * plane;
        float* sc = scale + base;
        window(s, p, x, true, n, c, rows, sc);
#pragma omp simd
        for (int64_t i = 0; i < plane; ++i) sc[i] = p.k + coef * sc[i];
        pow_neg(plane, sc, p.beta, y + base);
#pragma omp simd
        for (int64_t i = 0; i < plane; ++i) y[base + i] *= x[base + i];
      }
    }
  }
}

void lrn_backward(const LrnShape& s, const LrnParams& p, const float* x, const float* y,
                  const float* scale, const float* dy, float* dx, int num_threads) {
  const int64_t plane = s.H * s.W, total = s.N * s.C * plane;
  const float coef = 2.0f * p.alpha * p.beta / window_size(p);
  const int threads = threads_for(s, num_threads);
  std::vector<float> ratio(static_cast<size_t>(total));  // dy * y / scale, [N, C, H, W]
#pragma omp parallel for simd schedule(static) num_threads(threads)
  for (int64_t i = 0; i < total; ++i) ratio[i] = dy[i] * y[i] / scale[i];
#pragma omp parallel num_threads(threads)
  {
    std::vector<float> rows, powers(static_cast<size_t>(plane));
#pragma omp for collapse(2) schedule(static)
    for (int64_t n = 0; n < s.N; ++n) {
      for (int64_t c = 0; c < s.C; ++c) {
        const int64_t base = (n * s.C + c) * plane;
        float* out = dx + base;
        window(s, p, ratio.data(), false, n, c, rows, out);
        pow_neg(plane, scale + base, p.beta, powers.data());
#pragma omp simd
        for (int64_t i = 0; i < plane; ++i) {
          out[i] = dy[base + i] * powers[i] - coef * x[base + i] * out[i];
        }
      }
    }
  }
}

}  // namespace crema::kernels::cpu
