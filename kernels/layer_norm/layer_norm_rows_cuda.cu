// Layer normalization over rows of C contiguous elements (the last axis; the channels of an nhwc
// map), vectorized: what ConvNeXt runs (C = 96 .. 768, bf16 or f16 under model.precision).
//
// A group of LANES lanes (8, 16 or 32: the fewest that cover the row's C / V vectors with at
// most NV = 4 a lane) takes one row; a warp takes 32 / LANES rows at once, grid-stride over the
// rows. Lane s of a group holds the row's vectors j = s, s + LANES, ... (16 bytes each: V = 4
// floats or 8 halves) in registers, so x (and dy) is read from memory once: forward reads x and
// writes y; backward reads x and dy and writes dx. The row's sums are butterflies within the
// group (__shfl_xor_sync with offsets below LANES; every lane of the warp takes part, a row past
// the end adding zeros), so every lane ends with the same bits.
//
// Backward's parameter sums: a lane keeps the same vectors of every row it visits, so it adds
// dy xhat and dy for its channels in registers across its rows; then the groups of a warp are
// added by a butterfly, the 8 warps of a block in warp order through shared memory, and the
// block writes its partial [2][C]. finish_partials (layer_norm_cuda.cu) adds the blocks' partials
// in block order. No atomics: the bits depend on the shape only (the grid is a function of it).
#include <algorithm>

#include "kernels/common/launch.h"
#include "kernels/layer_norm/layer_norm_rows_cuda.cuh"

namespace crema::kernels::cuda {
namespace {

constexpr int kWarps = kThreads / 32;
constexpr int64_t kMaxForwardBlocks = 65536;
// Backward blocks: each takes at least kRowsPerGroup rows a group (fewer partials to add), at
// most kMaxBackwardBlocks blocks.
constexpr int64_t kRowsPerGroup = 2;
constexpr int64_t kMaxBackwardBlocks = 512;

// Sum over the LANES lanes of a group (LANES a power of two <= 32); all 32 lanes call it.
template <int LANES>
__device__ inline float group_sum(float v) {
#pragma unroll
  for (int offset = LANES / 2; offset > 0; offset /= 2) {
    v += __shfl_xor_sync(0xffffffffu, v, offset);
  }
  return v;
}

// weight[c .. c + V) (or ones) as floats.
template <int V>
__device__ inline void load_weight(const float* weight, int64_t c, float (&w)[V]) {
  if (weight != nullptr) {
    load_floats(weight, c, w);
  } else {
#pragma unroll
    for (int e = 0; e < V; ++e) w[e] = 1.0f;
  }
}

template <class T, int LANES, int NV>
__global__ void __launch_bounds__(kThreads)
    forward_rows_vectorized(int64_t rows, int64_t C, const T* x, const float* __restrict__ weight,
                            const float* __restrict__ bias, float eps, T* y,
                            float* __restrict__ mean, float* __restrict__ rstd) {
  constexpr int V = kPerVector<T>, kRowsPerWarp = 32 / LANES;
  const int lane = int(threadIdx.x) % 32, sub = lane % LANES, group = lane / LANES;
  const int64_t vectors = C / V;
  for (int64_t first = (int64_t(blockIdx.x) * kWarps + threadIdx.x / 32) * kRowsPerWarp;
       first < rows; first += int64_t(gridDim.x) * kWarps * kRowsPerWarp) {
    const int64_t row = first + group;
    const bool valid = row < rows;
    float v[NV][V];
    float sum = 0.0f;
#pragma unroll
    for (int k = 0; k < NV; ++k) {
      const int64_t j = sub + int64_t(LANES) * k;
      if (valid && j < vectors) {
        load_floats(x + row * C, j * V, v[k]);
#pragma unroll
        for (int e = 0; e < V; ++e) sum += v[k][e];
      }
    }
    const float m = group_sum<LANES>(sum) / float(C);
    float squares = 0.0f;
#pragma unroll
    for (int k = 0; k < NV; ++k) {
      const int64_t j = sub + int64_t(LANES) * k;
      if (valid && j < vectors) {
#pragma unroll
        for (int e = 0; e < V; ++e) squares += (v[k][e] - m) * (v[k][e] - m);
      }
    }
    const float r = rsqrtf(group_sum<LANES>(squares) / float(C) + eps);
    if (!valid) continue;
#pragma unroll
    for (int k = 0; k < NV; ++k) {
      const int64_t j = sub + int64_t(LANES) * k;
      if (j >= vectors) continue;
      float w[V], b[V] = {};
      load_weight(weight, j * V, w);
      if (bias != nullptr) load_floats(bias, j * V, b);
#pragma unroll
      for (int e = 0; e < V; ++e) v[k][e] = (v[k][e] - m) * r * w[e] + b[e];
      store_floats(y + row * C, j * V, v[k]);
    }
    if (sub == 0) {
      mean[row] = m;
      rstd[row] = r;
    }
  }
}

// Dynamic shared memory: 2 C floats (the block's parameter sums). dx may alias dy (no
// __restrict__ on either; y may alias x likewise): a lane reads its vectors before it writes them.
template <class T, int LANES, int NV>
__global__ void __launch_bounds__(kThreads)
    backward_rows_vectorized(int64_t rows, int64_t C, const T* __restrict__ x, const T* dy,
                             const float* __restrict__ weight, const float* __restrict__ mean,
                             const float* __restrict__ rstd, T* dx, float* __restrict__ partials) {
  constexpr int V = kPerVector<T>, kRowsPerWarp = 32 / LANES;
  extern __shared__ float block_sums[];  // [2][C]: dweight's, then dbias's
  const int lane = int(threadIdx.x) % 32, warp = int(threadIdx.x) / 32;
  const int sub = lane % LANES, group = lane / LANES;
  const int64_t vectors = C / V;
  float dw[NV][V] = {}, db[NV][V] = {};  // this lane's channels, over its rows
  for (int64_t first = (int64_t(blockIdx.x) * kWarps + warp) * kRowsPerWarp; first < rows;
       first += int64_t(gridDim.x) * kWarps * kRowsPerWarp) {
    const int64_t row = first + group;
    const bool valid = row < rows;
    const float m = valid ? mean[row] : 0.0f, r = valid ? rstd[row] : 0.0f;
    float h[NV][V], d[NV][V];  // xhat and dy of this lane's vectors
    float sum_g = 0.0f, sum_gh = 0.0f;
#pragma unroll
    for (int k = 0; k < NV; ++k) {
      const int64_t j = sub + int64_t(LANES) * k;
      if (!valid || j >= vectors) continue;
      load_floats(x + row * C, j * V, h[k]);
      load_floats(dy + row * C, j * V, d[k]);
      float w[V];
      load_weight(weight, j * V, w);
#pragma unroll
      for (int e = 0; e < V; ++e) {
        h[k][e] = (h[k][e] - m) * r;
        const float g = __fmul_rn(d[k][e], w[e]);  // rounded alone, as the general kernels
        sum_g += g;
        sum_gh += g * h[k][e];
        dw[k][e] += d[k][e] * h[k][e];
        db[k][e] += d[k][e];
      }
    }
    const float mean_g = group_sum<LANES>(sum_g) / float(C);
    const float mean_gh = group_sum<LANES>(sum_gh) / float(C);
    if (!valid || dx == nullptr) continue;
#pragma unroll
    for (int k = 0; k < NV; ++k) {
      const int64_t j = sub + int64_t(LANES) * k;
      if (j >= vectors) continue;
      float w[V];
      load_weight(weight, j * V, w);
#pragma unroll
      for (int e = 0; e < V; ++e) {
        d[k][e] = r * (__fmul_rn(d[k][e], w[e]) - mean_g - h[k][e] * mean_gh);
      }
      store_floats(dx + row * C, j * V, d[k]);
    }
  }
  if (partials == nullptr) return;
    // The groups of a warp hold the same channels: add them, then the warps in order.
#pragma unroll
  for (int k = 0; k < NV; ++k) {
#pragma unroll
    for (int e = 0; e < V; ++e) {
      for (int offset = LANES; offset < 32; offset *= 2) {
        dw[k][e] += __shfl_xor_sync(0xffffffffu, dw[k][e], offset);
        db[k][e] += __shfl_xor_sync(0xffffffffu, db[k][e], offset);
      }
    }
  }
  for (int w = 0; w < kWarps; ++w) {
    if (warp == w && group == 0) {
#pragma unroll
      for (int k = 0; k < NV; ++k) {
        const int64_t j = sub + int64_t(LANES) * k;
        if (j >= vectors) continue;
#pragma unroll
        for (int e = 0; e < V; ++e) {
          const int64_t c = j * V + e;
          block_sums[c] = (w == 0 ? 0.0f : block_sums[c]) + dw[k][e];
          block_sums[C + c] = (w == 0 ? 0.0f : block_sums[C + c]) + db[k][e];
        }
      }
    }
    __syncthreads();
  }
  for (int64_t c = threadIdx.x; c < 2 * C; c += kThreads) {
    partials[int64_t(blockIdx.x) * 2 * C + c] = block_sums[c];
  }
}

// The lanes a row takes: the fewest of 8, 16, 32 that hold its vectors at most 4 a lane.
int lanes_for(int64_t vectors) {
  return vectors <= 8 ? 8 : vectors <= 16 ? 16 : 32;
}

int64_t rows_per_block(int64_t vectors) {
  return int64_t(kWarps) * (32 / lanes_for(vectors));
}

// Calls launch(Config<LANES, NV>{}) with LANES and NV fixed for `vectors` (as lanes_for).
template <int LANES, int NV>
struct Config {
  static constexpr int lanes = LANES, nv = NV;
};
template <class Launch>
void with_config(int64_t vectors, Launch&& launch) {
  if (vectors <= 8) {
    launch(Config<8, 1>{});
  } else if (vectors <= 16) {
    launch(Config<16, 1>{});
  } else if (vectors <= 32) {
    launch(Config<32, 1>{});
  } else if (vectors <= 64) {
    launch(Config<32, 2>{});
  } else {
    launch(Config<32, 4>{});
  }
}

}  // namespace

template <class T>
int64_t layer_norm_rows_partials(int64_t rows, int64_t C) {
  const int64_t per_block = rows_per_block(C / kPerVector<T>) * kRowsPerGroup;
  return std::clamp<int64_t>(ceil_div(rows, per_block), 1, kMaxBackwardBlocks);
}

template <class T>
void layer_norm_rows_forward(int64_t rows, int64_t C, const T* x, const float* weight,
                             const float* bias, float eps, T* y, float* mean, float* rstd,
                             gpu::Stream stream) {
  const int64_t vectors = C / kPerVector<T>;
  const int blocks = blocks_for(rows, int(rows_per_block(vectors)), kMaxForwardBlocks);
  with_config(vectors, [&](auto config) {
    using Cfg = decltype(config);
    forward_rows_vectorized<T, Cfg::lanes, Cfg::nv>
        <<<blocks, kThreads, 0, stream>>>(rows, C, x, weight, bias, eps, y, mean, rstd);
  });
}

template <class T>
void layer_norm_rows_backward(int64_t rows, int64_t C, const T* x, const T* dy, const float* weight,
                              const float* mean, const float* rstd, T* dx, float* partials,
                              gpu::Stream stream) {
  const int64_t vectors = C / kPerVector<T>;
  const int blocks = int(layer_norm_rows_partials<T>(rows, C));
  const size_t shared = partials != nullptr ? size_t(2 * C) * sizeof(float) : 0;
  with_config(vectors, [&](auto config) {
    using Cfg = decltype(config);
    backward_rows_vectorized<T, Cfg::lanes, Cfg::nv>
        <<<blocks, kThreads, shared, stream>>>(rows, C, x, dy, weight, mean, rstd, dx, partials);
  });
}

#define CREMA_LAYER_NORM_ROWS_INSTANTIATE(T)                                                       \
  template int64_t layer_norm_rows_partials<T>(int64_t, int64_t);                                  \
  template void layer_norm_rows_forward<T>(int64_t, int64_t, const T*, const float*, const float*, \
                                           float, T*, float*, float*, gpu::Stream);                \
  template void layer_norm_rows_backward<T>(int64_t, int64_t, const T*, const T*, const float*,    \
                                            const float*, const float*, T*, float*, gpu::Stream);
CREMA_LAYER_NORM_ROWS_INSTANTIATE(float)
CREMA_LAYER_NORM_ROWS_INSTANTIATE(bf16_t)
CREMA_LAYER_NORM_ROWS_INSTANTIATE(f16_t)
#undef CREMA_LAYER_NORM_ROWS_INSTANTIATE

}  // namespace crema::kernels::cuda
