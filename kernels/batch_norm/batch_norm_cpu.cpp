// Batch normalization, fast CPU path, plain (batch_norm.h) and fused with the ReLU and the
// residual add (batch_norm_relu.h). Two layouts:
//   S > 1 ([N, C, H, W]): a channel is N contiguous runs of S values; channels are split over
//     threads and each channel's runs are walked with vectorized inner loops;
//   S == 1 ([N, C]): a channel is a column, C floats apart; walking it would miss the cache at
//     every value, so rows are walked instead, with the per-channel sums in arrays (a block of
//     channels per thread), vectorized across channels.
// Either way each channel's sums are accumulated in double in the same order whatever the thread
// count. Per element, z = (x - mean) * (gamma * invstd) + beta: subtracting the mean first keeps
// the precision when |mean| is large against the deviation.
//
// One code for both forms: the forward's last step is a `store` policy (y = z, or y = relu(z + r)
// with the copy of x) and the backward reads the gradient at z through a `grad` policy (dy, or
// dy masked by the ReLU, by y or by z recomputed with the forward's expression). The sums, their
// order and the arithmetic around them are shared, so the fused form gives the unfused chain's
// bits.
#include <algorithm>
#include <cmath>
#include <vector>

#include "kernels/batch_norm/batch_norm.h"
#include "kernels/batch_norm/batch_norm_relu.h"
#include "kernels/common/float_select.h"

namespace crema::kernels::cpu {
namespace {

// Below this many elements one thread is faster: a parallel region costs a few microseconds.
constexpr int64_t kParallelElements = 1 << 15;
// Channels per task in the S == 1 layout.
constexpr int64_t kColumnBlock = 256;

int threads_for(const BatchNormShape& s, int num_threads) {
  return s.N * s.C * s.S >= kParallelElements ? std::max(1, num_threads) : 1;
}

// A channel's mean and 1 / sqrt(var + eps).
struct ChannelStats {
  float mean, invstd;
};

// The normalized value; the fused backward recomputes the ReLU's input with this same expression.
inline float normalized(float x, float mean, float scale, float shift) {
  return (x - mean) * scale + shift;
}

// --- the policies: what the forward stores, where the backward's gradient comes from ---

struct StoreZ {
  float* y;
  void operator()(int64_t j, float, float z) const { y[j] = z; }
};

// y = relu((0 + z) + r) or relu(z), rounded as Eltwise SUM and ReLU round them; x copied first
// (y may alias x).
template <class T, bool kResidual, bool kCopy>
struct StoreRelu {
  const T* r;
  T* y;
  T* x_copy;
  void operator()(int64_t j, float x, float z) const {
    if constexpr (kCopy) x_copy[j] = T(x);
    float v = z;
    if constexpr (kResidual) v = (0.0f + z) + float(r[j]);
    y[j] = T(if_positive(v, v, 0.0f * v));
  }
};

// Runs f(store) with the StoreRelu that fits which of r and x_copy are present.
template <class T, class F>
void with_relu_store(const T* r, T* y, T* x_copy, F f) {
  if (r && x_copy) return f(StoreRelu<T, true, true>{r, y, x_copy});
  if (r) return f(StoreRelu<T, true, false>{r, y, x_copy});
  if (x_copy) return f(StoreRelu<T, false, true>{r, y, x_copy});
  f(StoreRelu<T, false, false>{r, y, x_copy});
}

// The gradient as stored: dy for the plain backward, the fused pass 1's dr in its pass 2.
template <class T>
struct LoadGrad {
  const T* g;
  struct Channel {
    const T* g;
    float operator()(int64_t j, float) const { return float(g[j]); }
  };
  Channel channel(int64_t) const { return {g}; }
};

// dv = dy where the ReLU's output y is positive (kFromY: batch_norm_relu.h) or, without y, where
// its input z, recomputed from x, is; written to dr when kWrite.
template <class T, bool kFromY, bool kWrite>
struct ReluGrad {
  const T *dy, *y;
  T* dr;
  const float *gamma, *beta, *mean, *invstd;
  struct Channel {
    const T *dy, *y;
    T* dr;
    float mean, scale, shift;
    float operator()(int64_t j, float x) const {
      float v;
      if constexpr (kFromY) {
        v = float(y[j]);
      } else {
        v = normalized(x, mean, scale, shift);
      }
      const float g = if_positive(v, float(dy[j]), 0.0f * float(dy[j]));
      if constexpr (kWrite) dr[j] = T(g);
      return g;
    }
  };
  Channel channel(int64_t c) const {
    return {dy, y, dr, mean[c], (gamma ? gamma[c] : 1.0f) * invstd[c], beta ? beta[c] : 0.0f};
  }
};

// --- forward statistics ---

template <class T>
double channel_sum(const BatchNormShape& s, int64_t c, const T* x) {
  double sum = 0.0;
  for (int64_t n = 0; n < s.N; ++n) {
    const T* row = x + (n * s.C + c) * s.S;
    double run = 0.0;
#pragma omp simd reduction(+ : run)
    for (int64_t i = 0; i < s.S; ++i) run += double(float(row[i]));
    sum += run;
  }
  return sum;
}

template <class T>
double channel_squares(const BatchNormShape& s, int64_t c, const T* x, double mean) {
  double sum = 0.0;
  for (int64_t n = 0; n < s.N; ++n) {
    const T* row = x + (n * s.C + c) * s.S;
    double run = 0.0;
#pragma omp simd reduction(+ : run)
    for (int64_t i = 0; i < s.S; ++i) {
      const double d = double(float(row[i])) - mean;
      run += d * d;
    }
    sum += run;
  }
  return sum;
}

// The statistics of channel c from its sum and sum of squared deviations; running ones updated.
void finish_stats(int64_t c, double M, double mean, double squares, float eps, float momentum,
                  ChannelStats* stats, float* running_mean, float* running_var) {
  stats[c] = {float(mean), float(1.0 / std::sqrt(squares / M + double(eps)))};
  if (running_mean) running_mean[c] = (1.0f - momentum) * running_mean[c] + momentum * float(mean);
  if (running_var) {
    running_var[c] = (1.0f - momentum) * running_var[c] + momentum * float(squares / (M - 1.0));
  }
}

// Statistics of every channel (S > 1), running statistics updated.
template <class T>
void batch_stats_by_channel(const BatchNormShape& s, const T* x, float eps, float momentum,
                            ChannelStats* stats, float* running_mean, float* running_var,
                            int threads) {
  const double M = double(s.N * s.S);
#pragma omp parallel for schedule(static) num_threads(threads)
  for (int64_t c = 0; c < s.C; ++c) {
    const double mean = channel_sum(s, c, x) / M;
    finish_stats(c, M, mean, channel_squares(s, c, x, mean), eps, momentum, stats, running_mean,
                 running_var);
  }
}

// The same for S == 1: rows of C channels.
template <class T>
void batch_stats_by_rows(const BatchNormShape& s, const T* x, float eps, float momentum,
                         ChannelStats* stats, float* running_mean, float* running_var,
                         int threads) {
  const double M = double(s.N);
  const int64_t blocks = (s.C + kColumnBlock - 1) / kColumnBlock;
#pragma omp parallel for schedule(static) num_threads(threads)
  for (int64_t b = 0; b < blocks; ++b) {
    const int64_t c0 = b * kColumnBlock, width = std::min(kColumnBlock, s.C - c0);
    double sum[kColumnBlock] = {}, squares[kColumnBlock] = {}, mean[kColumnBlock];
    for (int64_t n = 0; n < s.N; ++n) {
      const T* row = x + n * s.C + c0;
#pragma omp simd
      for (int64_t j = 0; j < width; ++j) sum[j] += double(float(row[j]));
    }
    for (int64_t j = 0; j < width; ++j) mean[j] = sum[j] / M;
    for (int64_t n = 0; n < s.N; ++n) {
      const T* row = x + n * s.C + c0;
#pragma omp simd
      for (int64_t j = 0; j < width; ++j) {
        const double d = double(float(row[j])) - mean[j];
        squares[j] += d * d;
      }
    }
    for (int64_t j = 0; j < width; ++j) {
      finish_stats(c0 + j, M, mean[j], squares[j], eps, momentum, stats, running_mean, running_var);
    }
  }
}

// store(j, x, z) for every element, z = (x - mean) * gamma * invstd + beta, either layout.
template <class T, class Store>
void normalize(const BatchNormShape& s, const T* x, const float* gamma, const float* beta,
               const ChannelStats* stats, Store store, int threads) {
  if (s.S > 1) {
#pragma omp parallel for schedule(static) num_threads(threads)
    for (int64_t c = 0; c < s.C; ++c) {
      const float mean = stats[c].mean, scale = (gamma ? gamma[c] : 1.0f) * stats[c].invstd;
      const float shift = beta ? beta[c] : 0.0f;
      for (int64_t n = 0; n < s.N; ++n) {
        const int64_t base = (n * s.C + c) * s.S;
#pragma omp simd
        for (int64_t i = 0; i < s.S; ++i) {
          const float v = float(x[base + i]);
          store(base + i, v, normalized(v, mean, scale, shift));
        }
      }
    }
    return;
  }
  std::vector<float> mean(size_t(s.C)), scale(size_t(s.C)), shift(size_t(s.C));
  for (int64_t c = 0; c < s.C; ++c) {
    mean[c] = stats[c].mean;
    scale[c] = (gamma ? gamma[c] : 1.0f) * stats[c].invstd;
    shift[c] = beta ? beta[c] : 0.0f;
  }
#pragma omp parallel for schedule(static) num_threads(threads)
  for (int64_t n = 0; n < s.N; ++n) {
#pragma omp simd
    for (int64_t c = 0; c < s.C; ++c) {
      const float v = float(x[n * s.C + c]);
      store(n * s.C + c, v, normalized(v, mean[c], scale[c], shift[c]));
    }
  }
}

template <class T, class Store>
void forward_training(const BatchNormShape& s, const T* x, const float* gamma, const float* beta,
                      float eps, float momentum, float* save_mean, float* save_invstd,
                      float* running_mean, float* running_var, float* num_batches_tracked,
                      Store store, int num_threads) {
  const int threads = threads_for(s, num_threads);
  std::vector<ChannelStats> stats(size_t(s.C));
  if (s.S > 1) {
    batch_stats_by_channel(s, x, eps, momentum, stats.data(), running_mean, running_var, threads);
  } else {
    batch_stats_by_rows(s, x, eps, momentum, stats.data(), running_mean, running_var, threads);
  }
  for (int64_t c = 0; c < s.C; ++c) {
    save_mean[c] = stats[c].mean;
    save_invstd[c] = stats[c].invstd;
  }
  normalize(s, x, gamma, beta, stats.data(), store, threads);
  if (num_batches_tracked) *num_batches_tracked += 1.0f;
}

template <class T, class Store>
void forward_inference(const BatchNormShape& s, const T* x, const float* gamma, const float* beta,
                       const float* running_mean, const float* running_var, float eps,
                       float* save_mean, float* save_invstd, Store store, int num_threads) {
  std::vector<ChannelStats> stats(size_t(s.C));
  for (int64_t c = 0; c < s.C; ++c) {
    stats[c] = {running_mean[c], 1.0f / std::sqrt(running_var[c] + eps)};
    save_mean[c] = stats[c].mean;
    save_invstd[c] = stats[c].invstd;
  }
  normalize(s, x, gamma, beta, stats.data(), store, threads_for(s, num_threads));
}

// --- backward ---

// Per channel, sum g and sum g * (x - mean), g the gradient at z (`grad`), either layout.
template <class T, class Grad>
void grad_sums(const BatchNormShape& s, const T* x, const float* save_mean, Grad grad,
               double* sum_g, double* sum_g_xmu, int threads) {
  if (s.S > 1) {
#pragma omp parallel for schedule(static) num_threads(threads)
    for (int64_t c = 0; c < s.C; ++c) {
      const float mean = save_mean[c];
      const auto g = grad.channel(c);
      double a = 0.0, b = 0.0;
      for (int64_t n = 0; n < s.N; ++n) {
        const int64_t base = (n * s.C + c) * s.S;
        double run_a = 0.0, run_b = 0.0;
#pragma omp simd reduction(+ : run_a, run_b)
        for (int64_t i = 0; i < s.S; ++i) {
          const float v = float(x[base + i]);
          const float gi = g(base + i, v);
          run_a += double(gi);
          run_b += double(gi) * double(v - mean);
        }
        a += run_a;
        b += run_b;
      }
      sum_g[c] = a;
      sum_g_xmu[c] = b;
    }
    return;
  }
  for (int64_t n = 0; n < s.N; ++n) {
#pragma omp simd
    for (int64_t c = 0; c < s.C; ++c) {
      const float v = float(x[n * s.C + c]);
      const float gi = grad.channel(c)(n * s.C + c, v);
      sum_g[c] += double(gi);
      sum_g_xmu[c] += double(gi) * double(v - save_mean[c]);
    }
  }
}

// With the per-channel sums sum_g and sum_g_xmu = sum g * (x - mean), g the gradient at z:
//   dx = a * (g - b - (x - mean) * d),  a = gamma * invstd,  b = sum_g / M,
//                                       d = invstd^2 * sum_g_xmu / M
// (b = d = 0 with fixed statistics), dgamma += invstd * sum_g_xmu, dbeta += sum_g. `first` is the
// gradient of the pass that sums (it may write dr), `second` the one of the pass that writes dx.
template <class T, class First, class Second>
void backward(const BatchNormShape& s, const T* x, const float* gamma, const float* save_mean,
              const float* save_invstd, bool need_sums, bool batch_stats, First first,
              Second second, T* dx, float* dgamma, float* dbeta, int num_threads) {
  const int threads = threads_for(s, num_threads);
  const double M = double(s.N * s.S);
  std::vector<double> sum_g(size_t(s.C), 0.0), sum_g_xmu(size_t(s.C), 0.0);
  if (need_sums) grad_sums(s, x, save_mean, first, sum_g.data(), sum_g_xmu.data(), threads);
  std::vector<float> a(size_t(s.C)), b(size_t(s.C)), d(size_t(s.C));
  for (int64_t c = 0; c < s.C; ++c) {
    const double invstd = double(save_invstd[c]);
    if (dgamma) dgamma[c] += float(invstd * sum_g_xmu[c]);
    if (dbeta) dbeta[c] += float(sum_g[c]);
    a[c] = float((gamma ? double(gamma[c]) : 1.0) * invstd);
    b[c] = batch_stats ? float(sum_g[c] / M) : 0.0f;
    d[c] = batch_stats ? float(invstd * invstd * sum_g_xmu[c] / M) : 0.0f;
  }
  if (!dx) return;
  if (s.S == 1) {
#pragma omp parallel for schedule(static) num_threads(threads)
    for (int64_t n = 0; n < s.N; ++n) {
#pragma omp simd
      for (int64_t c = 0; c < s.C; ++c) {
        const int64_t j = n * s.C + c;
        const float v = float(x[j]);
        dx[j] = T(a[c] * (second.channel(c)(j, v) - b[c] - (v - save_mean[c]) * d[c]));
      }
    }
    return;
  }
#pragma omp parallel for collapse(2) schedule(static) num_threads(threads)
  for (int64_t n = 0; n < s.N; ++n) {
    for (int64_t c = 0; c < s.C; ++c) {
      const int64_t base = (n * s.C + c) * s.S;
      const float ac = a[c], bc = b[c], dc = d[c], mean = save_mean[c];
      const auto g = second.channel(c);
#pragma omp simd
      for (int64_t i = 0; i < s.S; ++i) {
        const float v = float(x[base + i]);
        dx[base + i] = T(ac * (g(base + i, v) - bc - (v - mean) * dc));
      }
    }
  }
}

// The fused backward with the policies that fit: pass 1 writes dr (when wanted; it then runs even
// when no sum is needed) and pass 2 reads it back; without dr both passes apply the mask.
template <class T, bool kFromY>
void relu_backward(const BatchNormShape& s, const T* x, const T* y, const T* dy, const float* gamma,
                   const float* beta, const float* save_mean, const float* save_invstd,
                   bool batch_stats, T* dx, T* dr, float* dgamma, float* dbeta, int num_threads) {
  const ReluGrad<T, kFromY, false> mask{dy, y, nullptr, gamma, beta, save_mean, save_invstd};
  const bool need_sums = batch_stats || dgamma || dbeta;
  if (dr) {
    const ReluGrad<T, kFromY, true> write{dy, y, dr, gamma, beta, save_mean, save_invstd};
    backward(s, x, gamma, save_mean, save_invstd, true, batch_stats, write, LoadGrad<T>{dr}, dx,
             dgamma, dbeta, num_threads);
    return;
  }
  backward(s, x, gamma, save_mean, save_invstd, need_sums, batch_stats, mask, mask, dx, dgamma,
           dbeta, num_threads);
}

}  // namespace

void batch_norm_forward_training(const BatchNormShape& s, const float* x, const float* gamma,
                                 const float* beta, float eps, float momentum, float* y,
                                 float* save_mean, float* save_invstd, float* running_mean,
                                 float* running_var, float* num_batches_tracked, int num_threads) {
  forward_training(s, x, gamma, beta, eps, momentum, save_mean, save_invstd, running_mean,
                   running_var, num_batches_tracked, StoreZ{y}, num_threads);
}

void batch_norm_forward_inference(const BatchNormShape& s, const float* x, const float* gamma,
                                  const float* beta, const float* running_mean,
                                  const float* running_var, float eps, float* y, float* save_mean,
                                  float* save_invstd, int num_threads) {
  forward_inference(s, x, gamma, beta, running_mean, running_var, eps, save_mean, save_invstd,
                    StoreZ{y}, num_threads);
}

void batch_norm_backward(const BatchNormShape& s, const float* x, const float* dy,
                         const float* gamma, const float* save_mean, const float* save_invstd,
                         bool batch_stats, float* dx, float* dgamma, float* dbeta,
                         int num_threads) {
  const LoadGrad<float> grad{dy};
  backward(s, x, gamma, save_mean, save_invstd, batch_stats || dgamma || dbeta, batch_stats, grad,
           grad, dx, dgamma, dbeta, num_threads);
}

template <class T>
void batch_norm_relu_forward_training(const BatchNormShape& s, const T* x, const T* r,
                                      const float* gamma, const float* beta, float eps,
                                      float momentum, T* y, T* x_copy, float* save_mean,
                                      float* save_invstd, float* running_mean, float* running_var,
                                      float* num_batches_tracked, int num_threads) {
  with_relu_store(r, y, x_copy, [&](auto store) {
    forward_training(s, x, gamma, beta, eps, momentum, save_mean, save_invstd, running_mean,
                     running_var, num_batches_tracked, store, num_threads);
  });
}

template <class T>
void batch_norm_relu_forward_inference(const BatchNormShape& s, const T* x, const T* r,
                                       const float* gamma, const float* beta,
                                       const float* running_mean, const float* running_var,
                                       float eps, T* y, T* x_copy, float* save_mean,
                                       float* save_invstd, int num_threads) {
  with_relu_store(r, y, x_copy, [&](auto store) {
    forward_inference(s, x, gamma, beta, running_mean, running_var, eps, save_mean, save_invstd,
                      store, num_threads);
  });
}

template <class T>
void batch_norm_relu_backward(const BatchNormShape& s, const T* x, const T* y, const T* dy,
                              const float* gamma, const float* beta, const float* save_mean,
                              const float* save_invstd, bool batch_stats, T* dx, T* dr,
                              float* dgamma, float* dbeta, int num_threads) {
  (y ? relu_backward<T, true> : relu_backward<T, false>)(s, x, y, dy, gamma, beta, save_mean,
                                                         save_invstd, batch_stats, dx, dr, dgamma,
                                                         dbeta, num_threads);
}

template void batch_norm_relu_forward_training<float>(const BatchNormShape&, const float*,
                                                      const float*, const float*, const float*,
                                                      float, float, float*, float*, float*, float*,
                                                      float*, float*, float*, int);
template void batch_norm_relu_forward_inference<float>(const BatchNormShape&, const float*,
                                                       const float*, const float*, const float*,
                                                       const float*, const float*, float, float*,
                                                       float*, float*, float*, int);
template void batch_norm_relu_backward<float>(const BatchNormShape&, const float*, const float*,
                                              const float*, const float*, const float*,
                                              const float*, const float*, bool, float*, float*,
                                              float*, float*, int);

}  // namespace crema::kernels::cpu
