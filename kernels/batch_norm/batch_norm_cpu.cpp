// Batch normalization, fast CPU path. Two layouts:
//   S > 1 ([N, C, H, W]): a channel is N contiguous runs of S values; channels are split over
//     threads and each channel's runs are walked with vectorized inner loops;
//   S == 1 ([N, C]): a channel is a column, C floats apart; walking it would miss the cache at
//     every value, so rows are walked instead, with the per-channel sums in arrays (a block of
//     channels per thread), vectorized across channels.
// Either way each channel's sums are accumulated in double in the same order whatever the thread
// count. Per element, y = (x - mean) * (gamma * invstd) + beta: subtracting the mean first keeps
// the precision when |mean| is large against the deviation.
#include <algorithm>
#include <cmath>
#include <vector>

#include "kernels/batch_norm/batch_norm.h"

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

// --- S > 1: one channel at a time ---

double channel_sum(const BatchNormShape& s, int64_t c, const float* x) {
  double sum = 0.0;
  for (int64_t n = 0; n < s.N; ++n) {
    const float* row = x + (n * s.C + c) * s.S;
    double run = 0.0;
#pragma omp simd reduction(+ : run)
    for (int64_t i = 0; i < s.S; ++i) run += double(row[i]);
    sum += run;
  }
  return sum;
}

double channel_squares(const BatchNormShape& s, int64_t c, const float* x, double mean) {
  double sum = 0.0;
  for (int64_t n = 0; n < s.N; ++n) {
    const float* row = x + (n * s.C + c) * s.S;
    double run = 0.0;
#pragma omp simd reduction(+ : run)
    for (int64_t i = 0; i < s.S; ++i) {
      const double d = double(row[i]) - mean;
      run += d * d;
    }
    sum += run;
  }
  return sum;
}

void channel_normalize(const BatchNormShape& s, int64_t c, const float* x, float mean, float scale,
                       float shift, float* y) {
  for (int64_t n = 0; n < s.N; ++n) {
    const int64_t base = (n * s.C + c) * s.S;
#pragma omp simd
    for (int64_t i = 0; i < s.S; ++i) y[base + i] = (x[base + i] - mean) * scale + shift;
  }
}

// Statistics of every channel (S > 1), running statistics updated.
void batch_stats_by_channel(const BatchNormShape& s, const float* x, float eps, float momentum,
                            ChannelStats* stats, float* running_mean, float* running_var,
                            int threads) {
  const double M = double(s.N * s.S);
#pragma omp parallel for schedule(static) num_threads(threads)
  for (int64_t c = 0; c < s.C; ++c) {
    const double mean = channel_sum(s, c, x) / M;
    const double squares = channel_squares(s, c, x, mean);
    stats[c] = {float(mean), float(1.0 / std::sqrt(squares / M + double(eps)))};
    if (running_mean)
      running_mean[c] = (1.0f - momentum) * running_mean[c] + momentum * float(mean);
    if (running_var) {
      running_var[c] = (1.0f - momentum) * running_var[c] + momentum * float(squares / (M - 1.0));
    }
  }
}

// --- S == 1: rows of C channels ---

void batch_stats_by_rows(const BatchNormShape& s, const float* x, float eps, float momentum,
                         ChannelStats* stats, float* running_mean, float* running_var,
                         int threads) {
  const double M = double(s.N);
  const int64_t blocks = (s.C + kColumnBlock - 1) / kColumnBlock;
#pragma omp parallel for schedule(static) num_threads(threads)
  for (int64_t b = 0; b < blocks; ++b) {
    const int64_t c0 = b * kColumnBlock, width = std::min(kColumnBlock, s.C - c0);
    double sum[kColumnBlock] = {}, squares[kColumnBlock] = {}, mean[kColumnBlock];
    for (int64_t n = 0; n < s.N; ++n) {
      const float* row = x + n * s.C + c0;
#pragma omp simd
      for (int64_t j = 0; j < width; ++j) sum[j] += double(row[j]);
    }
    for (int64_t j = 0; j < width; ++j) mean[j] = sum[j] / M;
    for (int64_t n = 0; n < s.N; ++n) {
      const float* row = x + n * s.C + c0;
#pragma omp simd
      for (int64_t j = 0; j < width; ++j) {
        const double d = double(row[j]) - mean[j];
        squares[j] += d * d;
      }
    }
    for (int64_t j = 0; j < width; ++j) {
      const int64_t c = c0 + j;
      stats[c] = {float(mean[j]), float(1.0 / std::sqrt(squares[j] / M + double(eps)))};
      if (running_mean) {
        running_mean[c] = (1.0f - momentum) * running_mean[c] + momentum * float(mean[j]);
      }
      if (running_var) {
        running_var[c] =
            (1.0f - momentum) * running_var[c] + momentum * float(squares[j] / (M - 1.0));
      }
    }
  }
}

// y = (x - mean) * gamma * invstd + beta for every channel, either layout.
void normalize(const BatchNormShape& s, const float* x, const float* gamma, const float* beta,
               const ChannelStats* stats, float* y, int threads) {
  if (s.S > 1) {
#pragma omp parallel for schedule(static) num_threads(threads)
    for (int64_t c = 0; c < s.C; ++c) {
      const float scale = (gamma ? gamma[c] : 1.0f) * stats[c].invstd;
      channel_normalize(s, c, x, stats[c].mean, scale, beta ? beta[c] : 0.0f, y);
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
    const float* row = x + n * s.C;
    float* out = y + n * s.C;
#pragma omp simd
    for (int64_t c = 0; c < s.C; ++c) out[c] = (row[c] - mean[c]) * scale[c] + shift[c];
  }
}

}  // namespace

void batch_norm_forward_training(const BatchNormShape& s, const float* x, const float* gamma,
                                 const float* beta, float eps, float momentum, float* y,
                                 float* save_mean, float* save_invstd, float* running_mean,
                                 float* running_var, float* num_batches_tracked, int num_threads) {
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
  normalize(s, x, gamma, beta, stats.data(), y, threads);
  if (num_batches_tracked) *num_batches_tracked += 1.0f;
}

void batch_norm_forward_inference(const BatchNormShape& s, const float* x, const float* gamma,
                                  const float* beta, const float* running_mean,
                                  const float* running_var, float eps, float* y, float* save_mean,
                                  float* save_invstd, int num_threads) {
  std::vector<ChannelStats> stats(size_t(s.C));
  for (int64_t c = 0; c < s.C; ++c) {
    stats[c] = {running_mean[c], 1.0f / std::sqrt(running_var[c] + eps)};
    save_mean[c] = stats[c].mean;
    save_invstd[c] = stats[c].invstd;
  }
  normalize(s, x, gamma, beta, stats.data(), y, threads_for(s, num_threads));
}

// With the per-channel sums sum_dy and sum_dy_xmu = sum dy * (x - mean):
//   dx = a * (dy - b - (x - mean) * d),  a = gamma * invstd,  b = sum_dy / M,
//                                        d = invstd^2 * sum_dy_xmu / M
// (b = d = 0 with fixed statistics), dgamma += invstd * sum_dy_xmu, dbeta += sum_dy.
void batch_norm_backward(const BatchNormShape& s, const float* x, const float* dy,
                         const float* gamma, const float* save_mean, const float* save_invstd,
                         bool batch_stats, float* dx, float* dgamma, float* dbeta,
                         int num_threads) {
  const int threads = threads_for(s, num_threads);
  const double M = double(s.N * s.S);
  const bool need_sums = batch_stats || dgamma || dbeta;
  std::vector<double> sum_dy(size_t(s.C), 0.0), sum_dy_xmu(size_t(s.C), 0.0);
  if (need_sums && s.S > 1) {
#pragma omp parallel for schedule(static) num_threads(threads)
    for (int64_t c = 0; c < s.C; ++c) {
      const float mean = save_mean[c];
      double a = 0.0, b = 0.0;
      for (int64_t n = 0; n < s.N; ++n) {
        const int64_t base = (n * s.C + c) * s.S;
        double run_a = 0.0, run_b = 0.0;
#pragma omp simd reduction(+ : run_a, run_b)
        for (int64_t i = 0; i < s.S; ++i) {
          run_a += double(dy[base + i]);
          run_b += double(dy[base + i]) * double(x[base + i] - mean);
        }
        a += run_a;
        b += run_b;
      }
      sum_dy[c] = a;
      sum_dy_xmu[c] = b;
    }
  } else if (need_sums) {
    for (int64_t n = 0; n < s.N; ++n) {
      const float* row_x = x + n * s.C;
      const float* row_dy = dy + n * s.C;
#pragma omp simd
      for (int64_t c = 0; c < s.C; ++c) {
        sum_dy[c] += double(row_dy[c]);
        sum_dy_xmu[c] += double(row_dy[c]) * double(row_x[c] - save_mean[c]);
      }
    }
  }
  std::vector<float> a(size_t(s.C)), b(size_t(s.C)), d(size_t(s.C));
  for (int64_t c = 0; c < s.C; ++c) {
    const double invstd = double(save_invstd[c]);
    if (dgamma) dgamma[c] += float(invstd * sum_dy_xmu[c]);
    if (dbeta) dbeta[c] += float(sum_dy[c]);
    a[c] = float((gamma ? double(gamma[c]) : 1.0) * invstd);
    b[c] = batch_stats ? float(sum_dy[c] / M) : 0.0f;
    d[c] = batch_stats ? float(invstd * invstd * sum_dy_xmu[c] / M) : 0.0f;
  }
  if (!dx) return;
  if (s.S == 1) {
#pragma omp parallel for schedule(static) num_threads(threads)
    for (int64_t n = 0; n < s.N; ++n) {
      const int64_t base = n * s.C;
#pragma omp simd
      for (int64_t c = 0; c < s.C; ++c) {
        dx[base + c] = a[c] * (dy[base + c] - b[c] - (x[base + c] - save_mean[c]) * d[c]);
      }
    }
    return;
  }
#pragma omp parallel for collapse(2) schedule(static) num_threads(threads)
  for (int64_t n = 0; n < s.N; ++n) {
    for (int64_t c = 0; c < s.C; ++c) {
      const int64_t base = (n * s.C + c) * s.S;
      const float ac = a[c], bc = b[c], dc = d[c], mean = save_mean[c];
#pragma omp simd
      for (int64_t i = 0; i < s.S; ++i) {
        dx[base + i] = ac * (dy[base + i] - bc - (x[base + i] - mean) * dc);
      }
    }
  }
}

}  // namespace crema::kernels::cpu
