// Elementwise helpers, CUDA versions.
//
// Maps (fill, scale, axpy, axpby, add) go through map_cuda.cuh:
//   MapVersion::scalar      one element per thread and iteration of a grid-stride loop.
//   MapVersion::vectorized  as scalar, with float4 loads and stores when every pointer is 16-byte
//                        aligned (four elements per access; the n % 4 tail in the same launch).
// add_bias_rows: one thread per element of y, the column being i % N (one version).
// accumulate_bias_rows, dbias[n] += sum_m dy[m, n]:
//   BiasVersion::column_serial  one thread per column adds the M rows in order: the CPU path's
//                               order, so the same bits, but M dependent steps per thread.
//   BiasVersion::row_groups     a block of 32 columns x 16 row groups; group r adds rows r, r+16,
//                               ... in order, then the 16 group sums meet in a fixed tree: 16x
//                               shorter chains, still the same bits on every run.
//   16-bit dy (fp32 dbias): row chunks over the grid as well (a weight gradient's M is the
//                               batch's N*H*W), their sums added in chunk order by a second pass.
// sum, sum_of_squares: double partials per thread, a fixed-order tree per block, one finishing
// block over the block partials when there are several (reduce_cuda.cuh).
#include "kernels/elementwise/elementwise.h"

#include <cuda_fp16.h>

#include <algorithm>
#include <type_traits>

#include "kernels/common/launch.h"
#include "kernels/common/map_cuda.cuh"
#include "kernels/common/reduce_cuda.cuh"

namespace crema::kernels::cuda {
namespace {

using detail::launch_map;
using detail::Partial;

bool vectorized(MapVersion version) {
  return version == MapVersion::vectorized;
}

struct Constant {
  float value;
  __device__ float operator()() const { return value; }
};
struct Scaled {
  float alpha;
  __device__ float operator()(float x) const { return alpha * x; }
};
struct Axpy {
  float alpha;
  __device__ float operator()(float x, float y) const { return alpha * x + y; }
};
struct Axpby {
  float alpha, beta;
  __device__ float operator()(float x, float y) const { return alpha * x + beta * y; }
};
struct Sum {
  __device__ float operator()(float a, float b) const { return a + b; }
};

// --- sums ---

struct StoreSum {
  float* out;
  __device__ void operator()(Partial p) const { *out = float(p.value); }
};

// Each thread adds its elements (a grid-stride loop) in double; blocks reduce in a fixed tree.
template <bool kSquares>
__global__ void sum_kernel(int64_t n, const float* __restrict__ x, Partial* partials,
                           StoreSum finish) {
  Partial p{0.0, 0};
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n;
       i += int64_t(gridDim.x) * blockDim.x) {
    const double v = x[i];
    p.value += kSquares ? v * v : v;
  }
  detail::publish(detail::block_sum(p), partials, finish);
}

// Elements per thread before a sum uses another block.
constexpr int64_t kSumPerThread = 8;

template <bool kSquares>
void launch_sum(int64_t n, const float* x, float* out, void* workspace, gpu::Stream stream) {
  const int blocks = detail::reduce_blocks(n, kSumPerThread);
  Partial* partials = static_cast<Partial*>(workspace);
  sum_kernel<kSquares>
      <<<blocks, detail::kReduceThreads, 0, stream>>>(n, x, partials, StoreSum{out});
  gpu::check_launch(kSquares ? "sum_of_squares" : "sum");
  if (blocks > 1) {
    detail::finish_partials<<<1, detail::kReduceThreads, 0, stream>>>(partials, blocks,
                                                                      StoreSum{out});
    gpu::check_launch(kSquares ? "sum_of_squares (finish)" : "sum (finish)");
  }
}

// --- bias rows ---

// y [M, N] += bias [N], one thread per element.
template <class Index>
__global__ void add_bias_rows_kernel(Index total, Index N, const float* __restrict__ bias,
                                     float* __restrict__ y) {
  for (Index i = blockIdx.x * Index(blockDim.x) + threadIdx.x; i < total;
       i += Index(gridDim.x) * blockDim.x) {
    y[i] += bias[i % N];
  }
}

// v1: one thread per column, rows in order.
__global__ void accumulate_bias_rows_column_serial(int64_t M, int64_t N,
                                                   const float* __restrict__ dy,
                                                   float* __restrict__ dbias) {
  const int64_t n = blockIdx.x * int64_t(blockDim.x) + threadIdx.x;
  if (n >= N) return;
  float acc = dbias[n];
  for (int64_t m = 0; m < M; ++m) acc += dy[m * N + n];
  dbias[n] = acc;
}

constexpr int kBiasColumns = 32, kBiasRowGroups = 16;

// v2: block (32 columns, 16 row groups); group sums meet in a fixed tree.
__global__ void accumulate_bias_rows_row_groups(int64_t M, int64_t N, const float* __restrict__ dy,
                                                float* __restrict__ dbias) {
  __shared__ float partial[kBiasRowGroups][kBiasColumns];
  const int column = int(threadIdx.x), group = int(threadIdx.y);
  const int64_t n = blockIdx.x * int64_t(kBiasColumns) + column;
  float acc = 0.0f;
  if (n < N) {
    for (int64_t m = group; m < M; m += kBiasRowGroups) acc += dy[m * N + n];
  }
  partial[group][column] = acc;
  __syncthreads();
  for (int stride = kBiasRowGroups / 2; stride > 0; stride /= 2) {
    if (group < stride) partial[group][column] += partial[group + stride][column];
    __syncthreads();
  }
  if (group == 0 && n < N) dbias[n] += partial[0][column];
}

// --- bias rows from 16-bit dy ---
// dbias [N] (fp32) += sum_m dy[m, n], dy bf16 or f16 [M, N]: a grid of 32-column strips x row
// chunks; block (32 columns, 8 row groups) sums its chunk's rows r, r + 8, ... per group in order,
// the 8 group sums meet in a fixed tree and land in parts[chunk][n]; bias_parts_finish adds the
// chunks in order into dbias. The plan is a function of (M, N): the same bits every run.
constexpr int kPartColumns = 32, kPartRowGroups = 8;
constexpr int64_t kPartRowsAtLeast = 512, kPartBlocksAtMost = 2048;

int64_t bias_chunks(int64_t M, int64_t N) {
  const int64_t strips = ceil_div(N, kPartColumns);
  return std::max<int64_t>(
      1, std::min(ceil_div(M, kPartRowsAtLeast), std::max<int64_t>(1, kPartBlocksAtMost / strips)));
}

template <class T>
__device__ __forceinline__ float widen16(T value) {
  if constexpr (std::is_same_v<T, bf16_t>) return __uint_as_float(uint32_t(value.bits) << 16);
  return __half2float(__ushort_as_half(value.bits));
}

template <class T>
__global__ void bias_parts_kernel(int64_t M, int64_t N, int64_t rows_per_chunk,
                                  const T* __restrict__ dy, float* __restrict__ parts) {
  __shared__ float partial[kPartRowGroups][kPartColumns];
  const int column = int(threadIdx.x), group = int(threadIdx.y);
  const int64_t n = blockIdx.x * int64_t(kPartColumns) + column;
  const int64_t first = blockIdx.y * rows_per_chunk, last = min(M, first + rows_per_chunk);
  float acc = 0.0f;
  if (n < N) {
    for (int64_t m = first + group; m < last; m += kPartRowGroups) acc += widen16(dy[m * N + n]);
  }
  partial[group][column] = acc;
  __syncthreads();
  for (int stride = kPartRowGroups / 2; stride > 0; stride /= 2) {
    if (group < stride) partial[group][column] += partial[group + stride][column];
    __syncthreads();
  }
  if (group == 0 && n < N) parts[blockIdx.y * N + n] = partial[0][column];
}

__global__ void bias_parts_finish(int64_t N, int64_t chunks, const float* __restrict__ parts,
                                  float* __restrict__ dbias) {
  const int64_t n = blockIdx.x * int64_t(blockDim.x) + threadIdx.x;
  if (n >= N) return;
  float sum = 0.0f;
  for (int64_t c = 0; c < chunks; ++c) sum += parts[c * N + n];
  dbias[n] += sum;
}

}  // namespace

size_t accumulate_bias_rows_workspace(int64_t M, int64_t N) {
  return M > 0 && N > 0 ? size_t(bias_chunks(M, N) * N) : 0;
}

template <class T>
void accumulate_bias_rows_16bit(int64_t M, int64_t N, const T* dy, float* dbias, float* workspace,
                                gpu::Stream stream) {
  if (M == 0 || N == 0) return;
  const int64_t chunks = bias_chunks(M, N);
  const dim3 grid(unsigned(ceil_div(N, kPartColumns)), unsigned(chunks));
  bias_parts_kernel<T><<<grid, dim3(kPartColumns, kPartRowGroups), 0, stream>>>(
      M, N, ceil_div(M, chunks), dy, workspace);
  bias_parts_finish<<<int(ceil_div(N, 128)), 128, 0, stream>>>(N, chunks, workspace, dbias);
  gpu::check_launch("accumulate_bias_rows (16-bit dy)");
}
template void accumulate_bias_rows_16bit<bf16_t>(int64_t, int64_t, const bf16_t*, float*, float*,
                                                 gpu::Stream);
template void accumulate_bias_rows_16bit<f16_t>(int64_t, int64_t, const f16_t*, float*, float*,
                                                gpu::Stream);

template <class T>
void fill(int64_t n, float value, T* x, MapVersion version, gpu::Stream stream) {
  launch_map<0>(n, nullptr, nullptr, x, Constant{value}, vectorized(version), stream, "fill");
}

template <class T>
void scale(int64_t n, float alpha, T* x, MapVersion version, gpu::Stream stream) {
  launch_map<1>(n, x, nullptr, x, Scaled{alpha}, vectorized(version), stream, "scale");
}

template <class T>
void axpy(int64_t n, float alpha, const T* x, T* y, MapVersion version, gpu::Stream stream) {
  launch_map<2>(n, x, y, y, Axpy{alpha}, vectorized(version), stream, "axpy");
}

template <class T>
void axpby(int64_t n, float alpha, const T* x, float beta, T* y, MapVersion version,
           gpu::Stream stream) {
  if (beta == 0.0f) {  // BLAS: y is write-only, its old contents (even NaN) are ignored
    launch_map<1>(n, x, nullptr, y, Scaled{alpha}, vectorized(version), stream, "axpby");
    return;
  }
  launch_map<2>(n, x, y, y, Axpby{alpha, beta}, vectorized(version), stream, "axpby");
}

template <class T>
void add(int64_t n, const T* a, const T* b, T* out, MapVersion version, gpu::Stream stream) {
  launch_map<2>(n, a, b, out, Sum{}, vectorized(version), stream, "add");
}

#define CREMA_MAPS_INSTANTIATE(T)                                                       \
  template void fill<T>(int64_t, float, T*, MapVersion, gpu::Stream);                   \
  template void scale<T>(int64_t, float, T*, MapVersion, gpu::Stream);                  \
  template void axpy<T>(int64_t, float, const T*, T*, MapVersion, gpu::Stream);         \
  template void axpby<T>(int64_t, float, const T*, float, T*, MapVersion, gpu::Stream); \
  template void add<T>(int64_t, const T*, const T*, T*, MapVersion, gpu::Stream);
CREMA_MAPS_INSTANTIATE(float)
CREMA_MAPS_INSTANTIATE(bf16_t)
CREMA_MAPS_INSTANTIATE(f16_t)
#undef CREMA_MAPS_INSTANTIATE

size_t sum_workspace_bytes(int64_t n) {
  return detail::reduce_workspace_bytes(detail::reduce_blocks(n, kSumPerThread));
}

void sum(int64_t n, const float* x, float* out, void* workspace, gpu::Stream stream) {
  launch_sum<false>(n, x, out, workspace, stream);
}

void sum_of_squares(int64_t n, const float* x, float* out, void* workspace, gpu::Stream stream) {
  launch_sum<true>(n, x, out, workspace, stream);
}

void add_bias_rows(int64_t M, int64_t N, const float* bias, float* y, gpu::Stream stream) {
  const int64_t total = M * N;
  if (total == 0) return;
  const int blocks = detail::map_blocks(total);
  if (detail::int32_indexable(total)) {
    add_bias_rows_kernel<int32_t>
        <<<blocks, detail::kMapThreads, 0, stream>>>(int32_t(total), int32_t(N), bias, y);
  } else {
    add_bias_rows_kernel<int64_t><<<blocks, detail::kMapThreads, 0, stream>>>(total, N, bias, y);
  }
  gpu::check_launch("add_bias_rows");
}

void accumulate_bias_rows(int64_t M, int64_t N, const float* dy, float* dbias, BiasVersion version,
                          gpu::Stream stream) {
  if (N == 0) return;
  if (version == BiasVersion::column_serial) {
    const int threads = 128;
    const int blocks = int(ceil_div(N, threads));
    accumulate_bias_rows_column_serial<<<blocks, threads, 0, stream>>>(M, N, dy, dbias);
  } else {
    const int blocks = int(ceil_div(N, kBiasColumns));
    accumulate_bias_rows_row_groups<<<blocks, dim3(kBiasColumns, kBiasRowGroups), 0, stream>>>(
        M, N, dy, dbias);
  }
  gpu::check_launch("accumulate_bias_rows");
}

}  // namespace crema::kernels::cuda
