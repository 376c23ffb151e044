// Batch normalization, CUDA versions. x is [N, C, S]; channel c has M = N*S values, value k of it
// (k = n*S + i) at (n*C + c)*S + i. Sums are accumulated in double and reduced in fixed trees
// (no atomics): the same bits on every run.
//
//   BatchNormVersion::block_per_channel  one block per channel does everything in place: the
//       forward sums the channel (mean), sums its squared deviations (var), thread 0 saves the
//       statistics and updates the running ones, then the block writes y; the backward sums dy
//       and dy*(x - mean), then writes dx. C blocks: a GPU of 132 SMs idles when C is 16.
//   BatchNormVersion::split_channel  (best) each channel is cut into chunks of kChunk values, a
//       grid of C x chunks blocks. Kernel 1 writes each chunk's partial sums (forward: sum x and
//       sum x^2; backward: sum dy and sum dy*(x - mean)); kernel 2, on the same grid, has warp 0
//       of every block add its channel's partials in chunk order (the same bits in every block),
//       the chunk-0 block of each channel store the statistics, running statistics and parameter
//       gradients, and every block write its chunk's outputs. Two launches, enough blocks to
//       fill the GPU at LeNet's and VGG's sizes.
//   BatchNormVersion::split_rows  for S == 1 (nhwc, [N, C]): x is M rows of C channels; blocks of
//       32 channels x a chunk of rows sum whole rows (coalesced), one warp per channel adds the
//       chunks' partials and stores the statistics, an elementwise kernel writes y (backward:
//       the two gradient sums, the coefficients, dx). Three launches each way.
//   BatchNormVersion::split_rows_vec  split_rows with 16-byte loads and stores (V = 8 bf16 / f16
//       or 4 f32 channels a thread) in the kernels that touch the activations, where C % V == 0
//       and the pointers are aligned; split_rows otherwise (batch_norm_rows_vec_cuda.cuh).
//   BatchNormVersion::rows_tiled  split_rows_vec with each thread on fixed channels, their
//       parameters in registers, blocks that are tiles of whole rows, 2-3 rows' loads in flight
//       before a row's stores, and kernel 1's column sums by warp shuffles (or a shared-memory
//       tree) (batch_norm_rows_tiled_cuda.cuh); production's for S == 1.
// The inference forward is one elementwise kernel, used by every version (rows_tiled's where S ==
// 1 and the 16-byte form applies).
// split_channel's and split_rows' kernels live in batch_norm_cuda.cuh, templated on what the
// forward stores and where the backward's gradient comes from, so that the fused batch norm + ReLU
// (batch_norm_relu_cuda.cu) runs them too.
//
// Variance from sum x and sum x^2 (split_channel): var = E[x^2] - mean^2 in double loses about
// (mean / std)^2 * 1e-16 relative, negligible for activations (block_per_channel and the CPU
// subtract the mean first). A channel may have at most 2^31 - 1 values (the dispatch checks).
#include "core/error.h"
#include "kernels/batch_norm/batch_norm_rows_tiled_cuda.cuh"

namespace crema::kernels::cuda {
namespace {

// --- v1: block_per_channel, grid (C) ---

template <class T>
__global__ void forward_training_per_channel(BatchNormShape s, const T* x, const float* gamma,
                                             const float* beta, TrainingOutputs out, T* y) {
  const int64_t c = blockIdx.x;
  const Channel ch{s.C, s.S};
  const unsigned M = unsigned(s.N * s.S);
  double sum = 0.0;
  for (unsigned k = threadIdx.x; k < M; k += kThreads) sum += double(to_float(x[ch.offset(c, k)]));
  const double mean = block_sum({sum, 0.0}).a / double(M);
  double squares = 0.0;
  for (unsigned k = threadIdx.x; k < M; k += kThreads) {
    const double d = double(to_float(x[ch.offset(c, k)])) - mean;
    squares += d * d;
  }
  const double var = block_sum({squares, 0.0}).a / double(M);
  // Every thread reads x before thread 0 writes anything and before any y is written (y may
  // alias x): block_sum ends with a barrier.
  if (threadIdx.x == 0) out.store(c, double(M), mean, var);
  const float m = float(mean), invstd = float(1.0 / sqrt(var + double(out.eps)));
  const float scale = (gamma ? gamma[c] : 1.0f) * invstd, shift = beta ? beta[c] : 0.0f;
  for (unsigned k = threadIdx.x; k < M; k += kThreads) {
    const int64_t j = ch.offset(c, k);
    y[j] = from_float<T>(normalized(to_float(x[j]), m, scale, shift));
  }
}

template <class T>
__global__ void backward_per_channel(BatchNormShape s, const T* x, const T* dy, BackwardOutputs out,
                                     T* dx) {
  const int64_t c = blockIdx.x;
  const Channel ch{s.C, s.S};
  const unsigned M = unsigned(s.N * s.S);
  const float mean = out.save_mean[c];
  Sums sums{0.0, 0.0};
  for (unsigned k = threadIdx.x; k < M; k += kThreads) {
    const int64_t j = ch.offset(c, k);
    const float g = to_float(dy[j]);
    sums.a += double(g);
    sums.b += double(g) * double(to_float(x[j]) - mean);
  }
  sums = block_sum(sums);
  const float3 coef = out.finish(c, double(M), sums.a, sums.b, threadIdx.x == 0);
  if (!dx) return;
  for (unsigned k = threadIdx.x; k < M; k += kThreads) {
    const int64_t j = ch.offset(c, k);
    dx[j] = from_float<T>(coef.x * (to_float(dy[j]) - coef.y - (to_float(x[j]) - mean) * coef.z));
  }
}

}  // namespace

void check_version_fits(const BatchNormShape& s, BatchNormVersion version) {
  const bool rows = version == BatchNormVersion::split_rows ||
                    version == BatchNormVersion::split_rows_vec ||
                    version == BatchNormVersion::rows_tiled;
  CREMA_CHECK(!rows || s.S == 1,
              "the row versions (split_rows, split_rows_vec, rows_tiled) run x "
              "viewed as [M, C, 1]; this x has S = " +
                  std::to_string(s.S));
}

size_t batch_norm_workspace_bytes(const BatchNormShape& s, BatchNormVersion version) {
  if (version == BatchNormVersion::block_per_channel) return 0;
  if (version == BatchNormVersion::rows_tiled) return rows_tiled_workspace_bytes(s);
  if (version == BatchNormVersion::split_rows || version == BatchNormVersion::split_rows_vec) {
    return rows_workspace_bytes(s);
  }
  return size_t(s.C) * size_t(chunk_count(s.N * s.S)) * sizeof(Sums);
}

template <class T>
void batch_norm_forward_training(const BatchNormShape& s, const T* x, const float* gamma,
                                 const float* beta, float eps, float momentum, T* y,
                                 float* save_mean, float* save_invstd, float* running_mean,
                                 float* running_var, float* num_batches_tracked, void* workspace,
                                 BatchNormVersion version, gpu::Stream stream) {
  if (s.C == 0) return;
  const TrainingOutputs out{eps,          momentum,    save_mean,          save_invstd,
                            running_mean, running_var, num_batches_tracked};
  if (version == BatchNormVersion::block_per_channel) {
    forward_training_per_channel<<<unsigned(s.C), kThreads, 0, stream>>>(s, x, gamma, beta, out, y);
    gpu::check_launch("batch_norm_forward_training (block_per_channel)");
    return;
  }
  check_version_fits(s, version);
  forward_training_version(version, s, x, gamma, beta, out, StoreZ<T>{y}, workspace, stream,
                           "batch_norm_forward_training");
}

template <class T>
void batch_norm_forward_inference(const BatchNormShape& s, const T* x, const float* gamma,
                                  const float* beta, const float* running_mean,
                                  const float* running_var, float eps, T* y, float* save_mean,
                                  float* save_invstd, gpu::Stream stream) {
  forward_inference_best(s, x, gamma, beta, running_mean, running_var, eps, StoreZ<T>{y}, save_mean,
                         save_invstd, stream, "batch_norm_forward_inference");
}

template <class T>
void batch_norm_backward(const BatchNormShape& s, const T* x, const T* dy, const float* gamma,
                         const float* save_mean, const float* save_invstd, bool batch_stats, T* dx,
                         float* dgamma, float* dbeta, void* workspace, BatchNormVersion version,
                         gpu::Stream stream) {
  if (s.C == 0) return;
  const BackwardOutputs out{batch_stats, gamma, save_mean, save_invstd, dgamma, dbeta};
  if (version == BatchNormVersion::block_per_channel) {
    backward_per_channel<<<unsigned(s.C), kThreads, 0, stream>>>(s, x, dy, out, dx);
    gpu::check_launch("batch_norm_backward (block_per_channel)");
    return;
  }
  const LoadGrad<T> grad{dy};
  const bool have_sums = batch_stats || dgamma || dbeta;
  check_version_fits(s, version);
  backward_version(version, s, x, out, have_sums, grad, grad, dx, workspace, stream,
                   "batch_norm_backward");
}

#define CREMA_BATCH_NORM_INSTANTIATE(T)                                                          \
  template void batch_norm_forward_training<T>(                                                  \
      const BatchNormShape&, const T*, const float*, const float*, float, float, T*, float*,     \
      float*, float*, float*, float*, void*, BatchNormVersion, gpu::Stream);                     \
  template void batch_norm_forward_inference<T>(const BatchNormShape&, const T*, const float*,   \
                                                const float*, const float*, const float*, float, \
                                                T*, float*, float*, gpu::Stream);                \
  template void batch_norm_backward<T>(const BatchNormShape&, const T*, const T*, const float*,  \
                                       const float*, const float*, bool, T*, float*, float*,     \
                                       void*, BatchNormVersion, gpu::Stream);
CREMA_BATCH_NORM_INSTANTIATE(float)
CREMA_BATCH_NORM_INSTANTIATE(bf16_t)
CREMA_BATCH_NORM_INSTANTIATE(f16_t)
#undef CREMA_BATCH_NORM_INSTANTIATE

}  // namespace crema::kernels::cuda
