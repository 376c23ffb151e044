// Batch normalization on CUDA, version split_rows (BatchNormVersion::split_rows): the kernels
// and launchers for S == 1, where x is M rows of C contiguous channels (an nhwc x viewed as
// [N*H*W, C, 1], or [N, C] features), with the policies and sums of batch_norm_cuda.cuh.
// Included through batch_norm_rows_vec_cuda.cuh only (split_rows_vec falls back to it).
//
// Kernel 1 runs on a grid (tiles of 32 channels, chunks of rows): lane l of every warp sums
// channel tile + l, warp w the rows w, w + 8, ... of the chunk, so a warp reads 32 neighbouring
// channels of one row (coalesced: 128 bytes of f32, 64 of bf16) and the 8 warps' column sums are
// added in a fixed order; partials[c * chunks + chunk] as split_channel's. Kernel 2, one warp per
// channel, adds a channel's partials in chunk order (channel_total, the same tree as
// split_channel's) and stores the statistics (forward) or the coefficients (backward). Kernel 3
// is elementwise over the M * C values. No atomics: the same bits on every run.
#pragma once

#include "kernels/batch_norm/batch_norm_cuda.cuh"

namespace crema::kernels::cuda {
namespace {

constexpr int kTileChannels = 32;
constexpr int kTileRows = kThreads / kTileChannels;  // 8 warps, one row each per step
// Rows per chunk (32 per thread), and more when that would give more than kMaxChunks chunks.
constexpr int64_t kRowChunk = 256;

inline int64_t row_chunk_length(int64_t M) {
  const int64_t by_limit = (M + kMaxChunks - 1) / kMaxChunks;
  return by_limit > kRowChunk ? by_limit : kRowChunk;
}

inline int row_chunk_count(int64_t M) {
  const int64_t chunk = row_chunk_length(M);
  const int64_t chunks = (M + chunk - 1) / chunk;
  return int(chunks < 1 ? 1 : chunks);
}

// split_rows' scratch: the partials, then the backward's coefficients (one float3 per channel).
inline size_t rows_workspace_bytes(const BatchNormShape& s) {
  return size_t(s.C) * size_t(row_chunk_count(s.N)) * sizeof(Sums) + size_t(s.C) * sizeof(float3);
}

// The block's 8 per-warp sums of this lane's channel, added in warp order; valid in warp 0.
__device__ inline Sums tile_column_sum(Sums v) {
  __shared__ Sums rows[kTileRows][kTileChannels];
  const int lane = int(threadIdx.x) % kTileChannels, row = int(threadIdx.x) / kTileChannels;
  rows[row][lane] = v;
  __syncthreads();
  Sums total{0.0, 0.0};
  if (row == 0) {
    for (int r = 0; r < kTileRows; ++r) {
      total.a += rows[r][lane].a;
      total.b += rows[r][lane].b;
    }
  }
  return total;
}

// This thread's channel and its chunk's rows [r0, r1), walked from r0 + warp in steps of 8.
struct RowTile {
  int64_t c, r0, r1;
  int row;
  __device__ RowTile(int64_t M, int64_t C, int64_t chunk) {
    c = int64_t(blockIdx.x) * kTileChannels + int(threadIdx.x) % kTileChannels;
    row = int(threadIdx.x) / kTileChannels;
    r0 = int64_t(blockIdx.y) * chunk;
    r1 = r0 + chunk < M ? r0 + chunk : M;
    if (c >= C) r1 = r0;  // lanes past the last channel add nothing
  }
};

template <class T>
__global__ void partial_moments_rows(int64_t M, int64_t C, int64_t chunk, const T* x,
                                     Sums* partials) {
  const RowTile t(M, C, chunk);
  Sums sums{0.0, 0.0};
#pragma unroll 4  // several loads in flight per thread; the adds keep their order
  for (int64_t r = t.r0 + t.row; r < t.r1; r += kTileRows) {
    const double v = double(to_float(x[r * C + t.c]));
    sums.a += v;
    sums.b += v * v;
  }
  sums = tile_column_sum(sums);
  if (t.row == 0 && t.c < C) partials[t.c * gridDim.y + blockIdx.y] = sums;
}

template <class T, class Grad>
__global__ void partial_grad_sums_rows(int64_t M, int64_t C, int64_t chunk, const T* x, Grad grad,
                                       const float* save_mean, Sums* partials) {
  const RowTile t(M, C, chunk);
  Sums sums{0.0, 0.0};
  if (t.c < C) {
    const float mean = save_mean[t.c];
    const auto g = grad.channel(t.c);
#pragma unroll 4
    for (int64_t r = t.r0 + t.row; r < t.r1; r += kTileRows) {
      const int64_t j = r * C + t.c;
      const float v = to_float(x[j]);
      const float gj = g(j, v);
      sums.a += double(gj);
      sums.b += double(gj) * double(v - mean);
    }
  }
  sums = tile_column_sum(sums);
  if (t.row == 0 && t.c < C) partials[t.c * gridDim.y + blockIdx.y] = sums;
}

// Warp w of block b finishes channel b * 8 + w (all its lanes share it, as channel_total needs).
__device__ inline int64_t warp_channel() {
  return int64_t(blockIdx.x) * kWarps + int(threadIdx.x) / 32;
}

__global__ void finish_moments_rows(int64_t C, double M, int chunks, const Sums* partials,
                                    TrainingOutputs out) {
  const int64_t c = warp_channel();
  if (c >= C) return;
  const Sums total = channel_total(partials, c, chunks);
  if (threadIdx.x % 32 == 0) {
    const double m = total.a / M;
    out.store(c, M, m, fmax(total.b / M - m * m, 0.0));
  }
}

__global__ void finish_grad_sums_rows(int64_t C, double M, int chunks, const Sums* partials,
                                      bool have_sums, BackwardOutputs out, float3* coef) {
  const int64_t c = warp_channel();
  if (c >= C) return;
  const Sums total = have_sums ? channel_total(partials, c, chunks) : Sums{0.0, 0.0};
  if (threadIdx.x % 32 == 0) coef[c] = out.finish(c, M, total.a, total.b, true);
}

// z = (x - mean[c]) * gamma[c] * invstd[c] + beta[c] for every element e (c = e % C).
template <class Index, class T, class Store>
__global__ void normalize_rows(Index total, Index C, const T* x, const float* gamma,
                               const float* beta, const float* mean, const float* invstd,
                               Store store) {
  for (Index e = Index(blockIdx.x) * kThreads + threadIdx.x; e < total;
       e += Index(gridDim.x) * kThreads) {
    const Index c = e % C;
    const float scale = (gamma ? gamma[c] : 1.0f) * invstd[c];
    const float v = to_float(x[e]);
    store(e, v, normalized(v, mean[c], scale, beta ? beta[c] : 0.0f));
  }
}

template <class Index, class T, class Grad>
__global__ void backward_apply_rows(Index total, Index C, const T* x, Grad grad, const float* mean,
                                    const float3* coef, T* dx) {
  for (Index e = Index(blockIdx.x) * kThreads + threadIdx.x; e < total;
       e += Index(gridDim.x) * kThreads) {
    const Index c = e % C;
    const float3 k3 = coef[c];
    const float v = to_float(x[e]);
    const float g = grad.channel(c)(e, v);
    dx[e] = from_float<T>(k3.x * (g - k3.y - (v - mean[c]) * k3.z));
  }
}

// split_rows' training forward (S == 1): statistics, then store(j, x, z) for every element.
template <class T, class Store>
void forward_training_rows(const BatchNormShape& s, const T* x, const float* gamma,
                           const float* beta, const TrainingOutputs& out, Store store,
                           void* workspace, gpu::Stream stream, const char* op) {
  const int64_t M = s.N, C = s.C, total = M * C;
  const int chunks = row_chunk_count(M);
  Sums* partials = static_cast<Sums*>(workspace);
  const dim3 grid(unsigned(ceil_div(C, kTileChannels)), unsigned(chunks));
  partial_moments_rows<<<grid, kThreads, 0, stream>>>(M, C, row_chunk_length(M), x, partials);
  gpu::check_launch(op);
  finish_moments_rows<<<unsigned(ceil_div(C, kWarps)), kThreads, 0, stream>>>(C, double(M), chunks,
                                                                              partials, out);
  gpu::check_launch(op);
  const int blocks = blocks_for(total, kThreads, 4096);
  if (total <= (int64_t(1) << 30)) {
    normalize_rows<unsigned><<<blocks, kThreads, 0, stream>>>(
        unsigned(total), unsigned(C), x, gamma, beta, out.save_mean, out.save_invstd, store);
  } else {
    normalize_rows<int64_t><<<blocks, kThreads, 0, stream>>>(total, C, x, gamma, beta,
                                                             out.save_mean, out.save_invstd, store);
  }
  gpu::check_launch(op);
}

// split_rows' backward (S == 1): `first` gives the gradient at z to the sums (and may store dr),
// `second` to dx.
template <class T, class First, class Second>
void backward_rows(const BatchNormShape& s, const T* x, const BackwardOutputs& out, bool have_sums,
                   First first, Second second, T* dx, void* workspace, gpu::Stream stream,
                   const char* op) {
  const int64_t M = s.N, C = s.C, total = M * C;
  const int chunks = row_chunk_count(M);
  Sums* partials = static_cast<Sums*>(workspace);
  float3* coef = reinterpret_cast<float3*>(partials + C * chunks);
  if (have_sums) {
    const dim3 grid(unsigned(ceil_div(C, kTileChannels)), unsigned(chunks));
    partial_grad_sums_rows<<<grid, kThreads, 0, stream>>>(M, C, row_chunk_length(M), x, first,
                                                          out.save_mean, partials);
    gpu::check_launch(op);
  }
  finish_grad_sums_rows<<<unsigned(ceil_div(C, kWarps)), kThreads, 0, stream>>>(
      C, double(M), chunks, partials, have_sums, out, coef);
  gpu::check_launch(op);
  if (!dx) return;
  const int blocks = blocks_for(total, kThreads, 4096);
  if (total <= (int64_t(1) << 30)) {
    backward_apply_rows<unsigned><<<blocks, kThreads, 0, stream>>>(unsigned(total), unsigned(C), x,
                                                                   second, out.save_mean, coef, dx);
  } else {
    backward_apply_rows<int64_t>
        <<<blocks, kThreads, 0, stream>>>(total, C, x, second, out.save_mean, coef, dx);
  }
  gpu::check_launch(op);
}

}  // namespace
}  // namespace crema::kernels::cuda
