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
// sum, sum_of_squares: double partials per thread, a fixed-order tree per block, one finishing
// block over the block partials when there are several (reduce_cuda.cuh).
#include "kernels/elementwise/elementwise.h"

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

}  // namespace

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
