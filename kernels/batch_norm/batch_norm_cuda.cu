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
// The inference forward is one elementwise kernel, used by both versions.
// split_channel's kernels live in batch_norm_cuda.cuh, templated on what the forward stores and
// where the backward's gradient comes from, so that the fused batch norm + ReLU
// (batch_norm_relu_cuda.cu) runs them too.
//
// Variance from sum x and sum x^2 (split_channel): var = E[x^2] - mean^2 in double loses about
// (mean / std)^2 * 1e-16 relative, negligible for activations (block_per_channel and the CPU
// subtract the mean first). A channel may have at most 2^31 - 1 values (the dispatch checks).
#include "kernels/batch_norm/batch_norm_cuda.cuh"

namespace crema::kernels::cuda {
namespace {

// --- v1: block_per_channel, grid (C) ---

__global__ void forward_training_per_channel(BatchNormShape s, const float* x, const float* gamma,
                                             const float* beta, TrainingOutputs out, float* y) {
  const int64_t c = blockIdx.x;
  const Channel ch{s.C, s.S};
  const unsigned M = unsigned(s.N * s.S);
  double sum = 0.0;
  for (unsigned k = threadIdx.x; k < M; k += kThreads) sum += double(x[ch.offset(c, k)]);
  const double mean = block_sum({sum, 0.0}).a / double(M);
  double squares = 0.0;
  for (unsigned k = threadIdx.x; k < M; k += kThreads) {
    const double d = double(x[ch.offset(c, k)]) - mean;
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
    y[j] = normalized(x[j], m, scale, shift);
  }
}

__global__ void backward_per_channel(BatchNormShape s, const float* x, const float* dy,
                                     BackwardOutputs out, float* dx) {
  const int64_t c = blockIdx.x;
  const Channel ch{s.C, s.S};
  const unsigned M = unsigned(s.N * s.S);
  const float mean = out.save_mean[c];
  Sums sums{0.0, 0.0};
  for (unsigned k = threadIdx.x; k < M; k += kThreads) {
    const int64_t j = ch.offset(c, k);
    sums.a += double(dy[j]);
    sums.b += double(dy[j]) * double(x[j] - mean);
  }
  sums = block_sum(sums);
  const float3 coef = out.finish(c, double(M), sums.a, sums.b, threadIdx.x == 0);
  if (!dx) return;
  for (unsigned k = threadIdx.x; k < M; k += kThreads) {
    const int64_t j = ch.offset(c, k);
    dx[j] = coef.x * (dy[j] - coef.y - (x[j] - mean) * coef.z);
  }
}

}  // namespace

size_t batch_norm_workspace_bytes(const BatchNormShape& s, BatchNormVersion version) {
  if (version == BatchNormVersion::block_per_channel) return 0;
  return size_t(s.C) * size_t(chunk_count(s.N * s.S)) * sizeof(Sums);
}

void batch_norm_forward_training(const BatchNormShape& s, const float* x, const float* gamma,
                                 const float* beta, float eps, float momentum, float* y,
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
  forward_training_split(s, x, gamma, beta, out, StoreZ{y}, workspace, stream,
                         "batch_norm_forward_training (split_channel)");
}

void batch_norm_forward_inference(const BatchNormShape& s, const float* x, const float* gamma,
                                  const float* beta, const float* running_mean,
                                  const float* running_var, float eps, float* y, float* save_mean,
                                  float* save_invstd, gpu::Stream stream) {
  forward_inference(s, x, gamma, beta, running_mean, running_var, eps, StoreZ{y}, save_mean,
                    save_invstd, stream, "batch_norm_forward_inference");
}

void batch_norm_backward(const BatchNormShape& s, const float* x, const float* dy,
                         const float* gamma, const float* save_mean, const float* save_invstd,
                         bool batch_stats, float* dx, float* dgamma, float* dbeta, void* workspace,
                         BatchNormVersion version, gpu::Stream stream) {
  if (s.C == 0) return;
  const BackwardOutputs out{batch_stats, gamma, save_mean, save_invstd, dgamma, dbeta};
  if (version == BatchNormVersion::block_per_channel) {
    backward_per_channel<<<unsigned(s.C), kThreads, 0, stream>>>(s, x, dy, out, dx);
    gpu::check_launch("batch_norm_backward (block_per_channel)");
    return;
  }
  const LoadGrad<float> grad{dy};
  backward_split(s, x, out, batch_stats || dgamma || dbeta, grad, grad, dx, workspace, stream,
                 "batch_norm_backward (split_channel)");
}

}  // namespace crema::kernels::cuda
