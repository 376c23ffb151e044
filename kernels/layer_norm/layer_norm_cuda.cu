// Layer normalization, CUDA: the general kernels and the host entry points (layer_norm.h). Every
// kernel is a template on the storage type T of x, y, dy, dx (float, bf16_t, f16_t); weight,
// bias, mean, rstd and the parameter gradients are float32, the arithmetic float, one rounding at
// each store of T.
//
// Rows (inner = 1: the last axis, or the channels of an nhwc map) go to the vectorized kernels of
// layer_norm_rows_cuda.cu when C is a whole number of 16-byte vectors (4 floats, 8 halves) of at
// most 256 vectors and every pointer is 16-byte aligned; these general kernels take the rest:
//
// Rows, general: a warp per row of C, 8 rows per block, grid-stride over the rows. Lane l takes
// c = l, l + 32, ...; the row's sums are warp butterflies (__shfl_xor_sync: every lane ends with
// the same bits). Each pass reads the row again (from L1/L2 after the first).
//
// Columns (inner > 1, the channels of NCHW): a thread per position (o, i), grid-stride over
// positions, consecutive threads on consecutive i, so every load and store of a warp is coalesced
// per c; each thread loops over c for its own sums.
//
// Parameter gradients (dweight = sum dy xhat, dbias = sum dy over positions) are never float
// atomics: the kernels write per-block partials [S][2][C] to the workspace, and finish_partials
// adds each channel's S partials in block order, in double, into dweight and dbias (+=). Here
// block (c, s) of param_partials sums segment s of channel c's positions (xhat recomputed from x,
// mean and rstd); the vectorized rows backward fuses them into the dx pass.
//
// Mean and variance in float32, two passes (mean, then squared deviations).
#include <algorithm>

#include "core/error.h"
#include "kernels/common/float16_cuda.cuh"
#include "kernels/common/launch.h"
#include "kernels/common/reduce_cuda.cuh"
#include "kernels/layer_norm/layer_norm.h"
#include "kernels/layer_norm/layer_norm_rows_cuda.cuh"

namespace crema::kernels::cuda {
namespace {

constexpr int kWarpsPerBlock = kThreads / 32;
constexpr int64_t kMaxBlocks = 65536;
// General parameter partials: about 4096 positions a block, at most 1024 blocks in all.
constexpr int64_t kSegmentPositions = 4096;
constexpr int64_t kMaxPartialBlocks = 1024;

__device__ inline float warp_sum(float v) {
  for (int offset = 16; offset > 0; offset /= 2) v += __shfl_xor_sync(0xffffffffu, v, offset);
  return v;
}

__device__ inline float weight_of(const float* weight, int64_t c) {
  return weight != nullptr ? weight[c] : 1.0f;
}
__device__ inline float bias_of(const float* bias, int64_t c) {
  return bias != nullptr ? bias[c] : 0.0f;
}

template <class T>
__global__ void forward_rows(int64_t rows, int64_t C, const T* x, const float* weight,
                             const float* bias, float eps, T* y, float* mean, float* rstd) {
  const int lane = int(threadIdx.x) % 32;
  for (int64_t row = int64_t(blockIdx.x) * kWarpsPerBlock + threadIdx.x / 32; row < rows;
       row += int64_t(gridDim.x) * kWarpsPerBlock) {
    const T* xr = x + row * C;
    float sum = 0.0f;
    for (int64_t c = lane; c < C; c += 32) sum += to_float(xr[c]);
    const float m = warp_sum(sum) / float(C);
    float squares = 0.0f;
    for (int64_t c = lane; c < C; c += 32) {
      const float d = to_float(xr[c]) - m;
      squares += d * d;
    }
    const float r = rsqrtf(warp_sum(squares) / float(C) + eps);
    T* yr = y + row * C;
    for (int64_t c = lane; c < C; c += 32) {
      yr[c] = from_float<T>((to_float(xr[c]) - m) * r * weight_of(weight, c) + bias_of(bias, c));
    }
    if (lane == 0) {
      mean[row] = m;
      rstd[row] = r;
    }
  }
}

template <class T>
__global__ void backward_rows(int64_t rows, int64_t C, const T* x, const T* dy, const float* weight,
                              const float* mean, const float* rstd, T* dx) {
  const int lane = int(threadIdx.x) % 32;
  for (int64_t row = int64_t(blockIdx.x) * kWarpsPerBlock + threadIdx.x / 32; row < rows;
       row += int64_t(gridDim.x) * kWarpsPerBlock) {
    const T* xr = x + row * C;
    const T* dyr = dy + row * C;
    const float m = mean[row], r = rstd[row];
    float sum_g = 0.0f, sum_gx = 0.0f;
    for (int64_t c = lane; c < C; c += 32) {  // g rounded alone, as in backward_columns
      const float g = __fmul_rn(to_float(dyr[c]), weight_of(weight, c));
      sum_g += g;
      sum_gx += g * (to_float(xr[c]) - m) * r;
    }
    const float mean_g = warp_sum(sum_g) / float(C), mean_gx = warp_sum(sum_gx) / float(C);
    T* dxr = dx + row * C;
    for (int64_t c = lane; c < C; c += 32) {
      const float h = (to_float(xr[c]) - m) * r;
      const float g = __fmul_rn(to_float(dyr[c]), weight_of(weight, c));
      dxr[c] = from_float<T>(r * (g - mean_g - h * mean_gx));
    }
  }
}

template <class T>
__global__ void forward_columns(int64_t outer, int64_t C, int64_t inner, const T* x,
                                const float* weight, const float* bias, float eps, T* y,
                                float* mean, float* rstd) {
  for (int64_t pos = int64_t(blockIdx.x) * kThreads + threadIdx.x; pos < outer * inner;
       pos += int64_t(gridDim.x) * kThreads) {
    const int64_t o = pos / inner, i = pos % inner;
    const T* xp = x + o * C * inner + i;  // x[o, c, i] = xp[c * inner]
    float sum = 0.0f;
    for (int64_t c = 0; c < C; ++c) sum += to_float(xp[c * inner]);
    const float m = sum / float(C);
    float squares = 0.0f;
    for (int64_t c = 0; c < C; ++c) {
      const float d = to_float(xp[c * inner]) - m;
      squares += d * d;
    }
    const float r = rsqrtf(squares / float(C) + eps);
    T* yp = y + o * C * inner + i;
    for (int64_t c = 0; c < C; ++c) {
      yp[c * inner] = from_float<T>((to_float(xp[c * inner]) - m) * r * weight_of(weight, c) +
                                    bias_of(bias, c));
    }
    mean[pos] = m;
    rstd[pos] = r;
  }
}

template <class T>
__global__ void backward_columns(int64_t outer, int64_t C, int64_t inner, const T* x, const T* dy,
                                 const float* weight, const float* mean, const float* rstd, T* dx) {
  for (int64_t pos = int64_t(blockIdx.x) * kThreads + threadIdx.x; pos < outer * inner;
       pos += int64_t(gridDim.x) * kThreads) {
    const int64_t o = pos / inner, i = pos % inner, base = o * C * inner + i;
    const float m = mean[pos], r = rstd[pos];
    float sum_g = 0.0f, sum_gx = 0.0f;
    // g = dy * w rounded on its own (__fmul_rn: never fused into the subtraction below), so that
    // dx is exactly 0 where C = 1, as it is mathematically (g - mean_g = 0).
    for (int64_t c = 0; c < C; ++c) {
      const float g = __fmul_rn(to_float(dy[base + c * inner]), weight_of(weight, c));
      sum_g += g;
      sum_gx += g * (to_float(x[base + c * inner]) - m) * r;
    }
    const float mean_g = sum_g / float(C), mean_gx = sum_gx / float(C);
    for (int64_t c = 0; c < C; ++c) {
      const int64_t e = base + c * inner;
      const float h = (to_float(x[e]) - m) * r;
      dx[e] = from_float<T>(
          r * (__fmul_rn(to_float(dy[e]), weight_of(weight, c)) - mean_g - h * mean_gx));
    }
  }
}

// Block (c, s): sum over positions [s segment, (s + 1) segment) of channel c of dy xhat and dy,
// in double, into partials[s][0][c] and partials[s][1][c].
template <class T>
__global__ void param_partials(int64_t outer, int64_t C, int64_t inner, int64_t segment,
                               const T* __restrict__ x, const T* __restrict__ dy,
                               const float* __restrict__ mean, const float* __restrict__ rstd,
                               float* __restrict__ partials) {
  const int64_t c = blockIdx.x, s = blockIdx.y, total = outer * inner;
  const int64_t begin = s * segment, end = begin + segment < total ? begin + segment : total;
  double dw = 0.0, db = 0.0;
  for (int64_t j = begin + threadIdx.x; j < end; j += detail::kReduceThreads) {
    const int64_t o = j / inner, e = (o * C + c) * inner + (j - o * inner);
    const double d = to_float(dy[e]);
    dw += d * double((to_float(x[e]) - mean[j]) * rstd[j]);
    db += d;
  }
  dw = detail::block_sum(detail::Partial{dw, 0}).value;
  db = detail::block_sum(detail::Partial{db, 0}).value;
  if (threadIdx.x == 0) {
    partials[s * 2 * C + c] = float(dw);
    partials[s * 2 * C + C + c] = float(db);
  }
}

// Blocks of 32 channels x 8 slices: thread (lane, w) adds partials s = w, w + 8, ... of channel
// 32 blockIdx.x + lane in double; the 8 slices are then added in order and the result added
// into dweight / dbias (either may be null).
__global__ void finish_partials(int64_t C, int64_t S, const float* __restrict__ partials,
                                float* __restrict__ dweight, float* __restrict__ dbias) {
  constexpr int kSlices = detail::kReduceThreads / 32;
  __shared__ double sums[2][kSlices][32];
  const int lane = int(threadIdx.x) % 32, w = int(threadIdx.x) / 32;
  const int64_t c = int64_t(blockIdx.x) * 32 + lane;
  double dw = 0.0, db = 0.0;
  if (c < C) {
    for (int64_t s = w; s < S; s += kSlices) {
      dw += partials[s * 2 * C + c];
      db += partials[s * 2 * C + C + c];
    }
  }
  sums[0][w][lane] = dw;
  sums[1][w][lane] = db;
  __syncthreads();
  if (w != 0 || c >= C) return;
  dw = 0.0;
  db = 0.0;
  for (int k = 0; k < kSlices; ++k) {
    dw += sums[0][k][lane];
    db += sums[1][k][lane];
  }
  if (dweight != nullptr) dweight[c] = float(double(dweight[c]) + dw);
  if (dbias != nullptr) dbias[c] = float(double(dbias[c]) + db);
}

// Segments of the general parameter partials: a function of the sizes only (determinism).
int64_t param_segments(int64_t positions, int64_t C) {
  const int64_t by_work = ceil_div(positions, kSegmentPositions);
  const int64_t by_blocks = std::max<int64_t>(1, kMaxPartialBlocks / std::max<int64_t>(C, 1));
  return std::max<int64_t>(1, std::min(by_work, by_blocks));
}

bool aligned16(const void* p) {
  return (uintptr_t(p) & 15u) == 0;
}

// Whether the vectorized rows kernels take this call (null pointers count as aligned).
template <class T>
bool rows_vectorized(int64_t inner, int64_t C, std::initializer_list<const void*> pointers) {
  if (inner != 1 || !rows_vector_shape<T>(C)) return false;
  return std::all_of(pointers.begin(), pointers.end(), aligned16);
}

}  // namespace

template <class T>
void layer_norm_forward(int64_t outer, int64_t C, int64_t inner, const T* x, const float* weight,
                        const float* bias, float eps, T* y, float* mean, float* rstd,
                        gpu::Stream stream) {
  if (outer * inner == 0 || C == 0) return;
  if (rows_vectorized<T>(inner, C, {x, y, weight, bias})) {
    layer_norm_rows_forward(outer, C, x, weight, bias, eps, y, mean, rstd, stream);
  } else if (inner == 1) {
    const int blocks = blocks_for(outer, kWarpsPerBlock, kMaxBlocks);
    forward_rows<<<blocks, kThreads, 0, stream>>>(outer, C, x, weight, bias, eps, y, mean, rstd);
  } else {
    const int blocks = blocks_for(outer * inner, kThreads, kMaxBlocks);
    forward_columns<<<blocks, kThreads, 0, stream>>>(outer, C, inner, x, weight, bias, eps, y, mean,
                                                     rstd);
  }
  gpu::check_launch("layer_norm_forward");
}

template <class T>
size_t layer_norm_backward_workspace_bytes(int64_t outer, int64_t C, int64_t inner) {
  if (outer * inner == 0 || C == 0) return 0;
  const int64_t S = inner == 1 && rows_vector_shape<T>(C) ? layer_norm_rows_partials<T>(outer, C)
                                                          : param_segments(outer * inner, C);
  return size_t(S) * 2 * size_t(C) * sizeof(float);
}

template <class T>
void layer_norm_backward(int64_t outer, int64_t C, int64_t inner, const T* x, const T* dy,
                         const float* weight, const float* mean, const float* rstd, T* dx,
                         float* dweight, float* dbias, void* workspace, gpu::Stream stream) {
  if (outer * inner == 0 || C == 0) return;
  const bool params = dweight != nullptr || dbias != nullptr;
  CREMA_CHECK(!params || workspace != nullptr,
              "layer_norm_backward: parameter sums need a workspace");
  float* partials = static_cast<float*>(workspace);
  // The vectorized rows fuse the partials into the dx pass; their count is fixed by the shape,
  // so the workspace size does not depend on the pointers' alignment.
  if (rows_vectorized<T>(inner, C, {x, dy, dx, weight})) {
    layer_norm_rows_backward(outer, C, x, dy, weight, mean, rstd, dx, params ? partials : nullptr,
                             stream);
    gpu::check_launch("layer_norm_backward");
    if (params) {
      const int64_t S = layer_norm_rows_partials<T>(outer, C);
      finish_partials<<<unsigned(ceil_div(C, 32)), detail::kReduceThreads, 0, stream>>>(
          C, S, partials, dweight, dbias);
      gpu::check_launch("layer_norm_backward (parameter sums)");
    }
    return;
  }
  if (params) {  // first: dx may overwrite dy
    // The workspace is sized for the vectorized count when the shape allows it; the general
    // partials fit too only if they are no more, so the general path takes min(its, that) segments.
    int64_t S = param_segments(outer * inner, C);
    if (inner == 1 && rows_vector_shape<T>(C)) {
      S = std::min(S, layer_norm_rows_partials<T>(outer, C));
    }
    const int64_t segment = ceil_div(outer * inner, S);
    param_partials<<<dim3(unsigned(C), unsigned(S)), detail::kReduceThreads, 0, stream>>>(
        outer, C, inner, segment, x, dy, mean, rstd, partials);
    gpu::check_launch("layer_norm_backward (parameter partials)");
    finish_partials<<<unsigned(ceil_div(C, 32)), detail::kReduceThreads, 0, stream>>>(
        C, S, partials, dweight, dbias);
    gpu::check_launch("layer_norm_backward (parameter sums)");
  }
  if (dx != nullptr && inner == 1) {
    const int blocks = blocks_for(outer, kWarpsPerBlock, kMaxBlocks);
    backward_rows<<<blocks, kThreads, 0, stream>>>(outer, C, x, dy, weight, mean, rstd, dx);
  } else if (dx != nullptr) {
    const int blocks = blocks_for(outer * inner, kThreads, kMaxBlocks);
    backward_columns<<<blocks, kThreads, 0, stream>>>(outer, C, inner, x, dy, weight, mean, rstd,
                                                      dx);
  }
  gpu::check_launch("layer_norm_backward");
}

#define CREMA_LAYER_NORM_INSTANTIATE(T)                                                      \
  template void layer_norm_forward<T>(int64_t, int64_t, int64_t, const T*, const float*,     \
                                      const float*, float, T*, float*, float*, gpu::Stream); \
  template size_t layer_norm_backward_workspace_bytes<T>(int64_t, int64_t, int64_t);         \
  template void layer_norm_backward<T>(int64_t, int64_t, int64_t, const T*, const T*,        \
                                       const float*, const float*, const float*, T*, float*, \
                                       float*, void*, gpu::Stream);
CREMA_LAYER_NORM_INSTANTIATE(float)
CREMA_LAYER_NORM_INSTANTIATE(bf16_t)
CREMA_LAYER_NORM_INSTANTIATE(f16_t)
#undef CREMA_LAYER_NORM_INSTANTIATE

}  // namespace crema::kernels::cuda
