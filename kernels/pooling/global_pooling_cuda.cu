// Global pooling on CUDA (pooling.h, cuda::global_pool_forward): the one window of each (n, c)
// plane is the whole plane, so the forward is a reduction of HW = H * W elements per output --
// squeeze-excitation's squeeze, the pooling before a classifier. pool_forward_kernel's one
// thread per output walked 12,544 elements alone (EfficientNet-B0's first squeeze, [64, 32, 112,
// 112]: 5.8 ms in bf16 nhwc); here every thread of many blocks reads a slice:
//
//   nhwc (x [N, HW, C] in memory): a block of TX x TY threads, TX along the channels (16 bytes,
//     V = 4 floats or 8 halves, a thread; one element where C or a pointer does not allow
//     vectors), TY along the pixels of one segment of the plane: thread (tx, ty) reads pixels
//     ty, ty + TY, ... of segment s for its V channels, every warp's loads coalesced along C;
//     grid (channel tiles, S segments, N).
//   nchw (x [N*C, HW], the planes contiguous): a warp per plane segment, lanes along the pixels
//     (coalesced), 8 planes a block; grid (plane tiles, S segments).
//
// The threads of a block that share outputs are combined in a fixed order through shared memory;
// with S = 1 the block writes y, otherwise each block writes its partial to the workspace
// ([N*C][S]: a float sum, or a float max and its int index) and finish_global adds (or compares)
// each output's S partials in segment order. S is a function of the shape only, so the result's
// bits do not depend on anything else. No atomics.
//
// Average: sum in float, y = sum / HW, rounded once to T. Max: the reference's choice -- the
// largest value, the first in row-major order among equals, and the first NaN if there is one --
// is an order-independent rule on (value, index) pairs (combine_max), so every partial order
// gives the reference's argmax.
#include <algorithm>
#include <type_traits>

#include "core/error.h"
#include "kernels/common/float16_cuda.cuh"
#include "kernels/common/launch.h"
#include "kernels/pooling/pooling.h"

namespace crema::kernels::cuda {
namespace {

// Blocks a global pooling aims at: a few waves of an H100's 132 SMs (a constant: the shape alone
// fixes the grid, and with it the order of the sums).
constexpr int64_t kTargetBlocks = 1024;
// Fewest pixels a thread reads per segment before another segment is worth its partial.
constexpr int64_t kMinPixelsPerThread = 8;

// The running reduction of one output: a float sum, or the max with its plane index.
struct MaxAt {
  float value;
  int index;
};

// The reference's winner of two (value, index) pairs: a NaN over a number (the smaller index of
// two NaNs), else the larger value, the smaller index among equals.
__device__ inline MaxAt combine_max(MaxAt a, MaxAt b) {
  const bool na = isnan(a.value), nb = isnan(b.value);
  if (na || nb) {
    if (na && nb) return a.index < b.index ? a : b;
    return na ? a : b;
  }
  if (a.value != b.value) return a.value > b.value ? a : b;
  return a.index < b.index ? a : b;
}

// Partials [outputs][S]: sums, or maxima and their indices (max_index after the values).
struct Partials {
  float* values;
  int* indices;
};

template <PoolMode kMode, class T>
__device__ inline void store_result(float sum_or_max, int index, int64_t out, int64_t s, int S,
                                    int64_t HW, T* y, float* argmax, Partials partials) {
  if (S > 1) {
    partials.values[out * S + s] = sum_or_max;
    if constexpr (kMode == PoolMode::max) partials.indices[out * S + s] = index;
    return;
  }
  if constexpr (kMode == PoolMode::max) {
    y[out] = from_float<T>(sum_or_max);
    if (argmax != nullptr) argmax[out] = float(index);
  } else {
    y[out] = from_float<T>(sum_or_max / float(HW));
  }
}

// nhwc: block (TX, TY); thread (tx, ty) owns channels [V (tile TX + tx), + V) of image n.
template <PoolMode kMode, class T, int V>
__global__ void global_pool_nhwc(int64_t C, int64_t HW, int64_t segment, int S, const T* x, T* y,
                                 float* argmax, Partials partials) {
  extern __shared__ float shared[];  // [TY][TX * V] values, then (max) [TY][TX * V] indices
  const int TX = int(blockDim.x), TY = int(blockDim.y), tx = int(threadIdx.x),
            ty = int(threadIdx.y);
  const int64_t n = blockIdx.z, s = blockIdx.y;
  const int64_t c0 = (int64_t(blockIdx.x) * TX + tx) * V;
  const int64_t begin = s * segment, end = begin + segment < HW ? begin + segment : HW;
  float acc[V];
  int at[V];
#pragma unroll
  for (int e = 0; e < V; ++e) {
    acc[e] = kMode == PoolMode::max ? -INFINITY : 0.0f;
    at[e] = int(HW);  // past every pixel: any pixel read replaces it
  }
  if (c0 < C) {
    for (int64_t p = begin + ty; p < end; p += TY) {
      float v[V];
      load_floats(x, (n * HW + p) * C + c0, v);
#pragma unroll
      for (int e = 0; e < V; ++e) {
        if constexpr (kMode == PoolMode::max) {
          if (v[e] > acc[e] || (isnan(v[e]) && !isnan(acc[e])) || at[e] == int(HW)) {
            acc[e] = v[e];
            at[e] = int(p);
          }
        } else {
          acc[e] += v[e];
        }
      }
    }
  }
  float* values = shared;
  int* indices = reinterpret_cast<int*>(shared + TY * TX * V);
#pragma unroll
  for (int e = 0; e < V; ++e) {
    values[(ty * TX + tx) * V + e] = acc[e];
    if constexpr (kMode == PoolMode::max) indices[(ty * TX + tx) * V + e] = at[e];
  }
  __syncthreads();
  if (ty != 0 || c0 >= C) return;
#pragma unroll
  for (int e = 0; e < V; ++e) {
    float r = values[tx * V + e];
    int i = kMode == PoolMode::max ? indices[tx * V + e] : 0;
    for (int k = 1; k < TY; ++k) {  // the pixel slices in order
      const int slot = (k * TX + tx) * V + e;
      if constexpr (kMode == PoolMode::max) {
        // A slice that read no pixel holds (-inf, HW), which every pixel read beats.
        const MaxAt m = combine_max({r, i}, {values[slot], indices[slot]});
        r = m.value;
        i = m.index;
      } else {
        r += values[slot];
      }
    }
    store_result<kMode>(r, i, n * C + c0 + e, s, S, HW, y, argmax, partials);
  }
}

// nchw: warp w of the block takes plane 8 blockIdx.x + w, pixels of segment s strided by lane.
template <PoolMode kMode, class T>
__global__ void global_pool_nchw(int64_t planes, int64_t HW, int64_t segment, int S, const T* x,
                                 T* y, float* argmax, Partials partials) {
  const int lane = int(threadIdx.x) % 32;
  const int64_t plane = int64_t(blockIdx.x) * (blockDim.x / 32) + threadIdx.x / 32;
  const int64_t s = blockIdx.y;
  if (plane >= planes) return;  // a whole warp: the shuffles below stay within live warps
  const int64_t begin = s * segment, end = begin + segment < HW ? begin + segment : HW;
  float acc = kMode == PoolMode::max ? -INFINITY : 0.0f;
  int at = int(HW);
  for (int64_t p = begin + lane; p < end; p += 32) {
    const float v = to_float(x[plane * HW + p]);
    if constexpr (kMode == PoolMode::max) {
      if (v > acc || (isnan(v) && !isnan(acc)) || at == int(HW)) {
        acc = v;
        at = int(p);
      }
    } else {
      acc += v;
    }
  }
  for (int offset = 16; offset > 0; offset /= 2) {  // xor butterfly: the same bits on every lane
    const float other = __shfl_xor_sync(0xffffffffu, acc, offset);
    if constexpr (kMode == PoolMode::max) {
      // combine_max is symmetric, so both lanes of a pair keep the same winner; a lane that
      // read no pixel holds (-inf, HW), which every pixel read beats.
      const MaxAt m = combine_max({acc, at}, {other, __shfl_xor_sync(0xffffffffu, at, offset)});
      acc = m.value;
      at = m.index;
    } else {
      acc += other;
    }
  }
  if (lane == 0) store_result<kMode>(acc, at, plane, s, S, HW, y, argmax, partials);
}

// One thread per output: its S partials in segment order.
template <PoolMode kMode, class T>
__global__ void finish_global(int64_t outputs, int S, int64_t HW, Partials partials, T* y,
                              float* argmax) {
  const int64_t out = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (out >= outputs) return;
  float r = partials.values[out * S];
  int i = kMode == PoolMode::max ? partials.indices[out * S] : 0;
  for (int s = 1; s < S; ++s) {
    if constexpr (kMode == PoolMode::max) {
      const MaxAt m =
          combine_max({r, i}, {partials.values[out * S + s], partials.indices[out * S + s]});
      r = m.value;
      i = m.index;
    } else {
      r += partials.values[out * S + s];
    }
  }
  store_result<kMode>(r, i, out, 0, 1, HW, y, argmax, partials);
}

// The launch shape of one call, a function of the shape (and T's vector width) only.
struct Plan {
  int V = 1;            // nhwc: channels a thread (16 bytes, or 1)
  int TX = 1, TY = 1;   // nhwc: threads along the channel vectors and along the pixels
  int64_t tiles = 1;    // blocks along the channels (nhwc) or the planes (nchw)
  int S = 1;            // segments of each plane
  int64_t segment = 0;  // pixels a segment
};

template <class T>
Plan plan_for(int64_t N, int64_t C, int64_t HW, Layout layout, bool vectors) {
  Plan plan;
  int64_t per_segment_threads;  // threads that read one segment's pixels of one output
  if (layout == Layout::nhwc) {
    plan.V = vectors ? kPerVector<T> : 1;
    const int64_t columns = ceil_div(C, plan.V);
    plan.TX = int(std::min<int64_t>(32, columns));
    plan.TY = kThreads / plan.TX;
    plan.tiles = ceil_div(columns, plan.TX);
    per_segment_threads = plan.TY;
    const int64_t blocks = plan.tiles * N;
    const int64_t by_target = std::max<int64_t>(1, kTargetBlocks / std::max<int64_t>(blocks, 1));
    const int64_t by_work = std::max<int64_t>(1, HW / (per_segment_threads * kMinPixelsPerThread));
    plan.S = int(std::min(by_target, by_work));
  } else {
    plan.tiles = ceil_div(N * C, kThreads / 32);
    per_segment_threads = 32;
    const int64_t by_target = std::max<int64_t>(1, kTargetBlocks / plan.tiles);
    const int64_t by_work = std::max<int64_t>(1, HW / (per_segment_threads * kMinPixelsPerThread));
    plan.S = int(std::min(by_target, by_work));
  }
  plan.S = int(std::min<int64_t>(plan.S, 65535));
  plan.segment = ceil_div(HW, plan.S);
  plan.S = int(ceil_div(HW, plan.segment));  // no empty segment
  return plan;
}

bool aligned16(const void* p) {
  return (uintptr_t(p) & 15u) == 0;
}

template <class T>
bool vectors_fit(int64_t C, const T* x) {
  return C % kPerVector<T> == 0 && aligned16(x);
}

}  // namespace

template <class T>
size_t global_pool_workspace_bytes(int64_t N, int64_t C, int64_t HW, PoolMode mode, Layout layout) {
  // The largest of the vector and scalar plans (the pointers decide between them later).
  size_t bytes = 0;
  for (bool vectors : {true, false}) {
    const Plan plan = plan_for<T>(N, C, HW, layout, vectors);
    if (plan.S == 1) continue;
    const size_t per = mode == PoolMode::max ? sizeof(float) + sizeof(int) : sizeof(float);
    bytes = std::max(bytes, size_t(N * C) * size_t(plan.S) * per);
  }
  return bytes;
}

template <class T>
void global_pool_forward(int64_t N, int64_t C, int64_t HW, PoolMode mode, const T* x, T* y,
                         float* argmax, Layout layout, void* workspace, gpu::Stream stream) {
  if (N * C == 0 || HW == 0) return;
  const bool vectors = layout == Layout::nhwc && vectors_fit(C, x);
  const Plan plan = plan_for<T>(N, C, HW, layout, vectors);
  const int64_t outputs = N * C;
  Partials partials{static_cast<float*>(workspace), nullptr};
  if (plan.S > 1) {
    CREMA_CHECK(workspace != nullptr, "global_pool_forward: the segments need a workspace");
    partials.indices = reinterpret_cast<int*>(partials.values + outputs * plan.S);
  }
  const auto launch = [&](auto mode_tag) {
    constexpr PoolMode kMode = decltype(mode_tag)::value;
    if (layout == Layout::nhwc) {
      const dim3 grid(unsigned(plan.tiles), unsigned(plan.S), unsigned(N));
      const dim3 block(unsigned(plan.TX), unsigned(plan.TY));
      const size_t shared = size_t(kThreads) * plan.V * (sizeof(float) + sizeof(int));
      if (vectors) {
        global_pool_nhwc<kMode, T, int(16 / sizeof(T))>
            <<<grid, block, shared, stream>>>(C, HW, plan.segment, plan.S, x, y, argmax, partials);
      } else {
        global_pool_nhwc<kMode, T, 1>
            <<<grid, block, shared, stream>>>(C, HW, plan.segment, plan.S, x, y, argmax, partials);
      }
    } else {
      const dim3 grid(unsigned(plan.tiles), unsigned(plan.S));
      global_pool_nchw<kMode, T><<<grid, kThreads, 0, stream>>>(outputs, HW, plan.segment, plan.S,
                                                                x, y, argmax, partials);
    }
    gpu::check_launch("global_pool_forward");
    if (plan.S > 1) {
      finish_global<kMode, T><<<unsigned(ceil_div(outputs, kThreads)), kThreads, 0, stream>>>(
          outputs, plan.S, HW, partials, y, argmax);
      gpu::check_launch("global_pool_forward (finish)");
    }
  };
  if (mode == PoolMode::max) {
    launch(std::integral_constant<PoolMode, PoolMode::max>{});
  } else {
    launch(std::integral_constant<PoolMode, PoolMode::average>{});
  }
}

#define CREMA_GLOBAL_POOL_INSTANTIATE(T)                                                          \
  template size_t global_pool_workspace_bytes<T>(int64_t, int64_t, int64_t, PoolMode, Layout);    \
  template void global_pool_forward<T>(int64_t, int64_t, int64_t, PoolMode, const T*, T*, float*, \
                                       Layout, void*, gpu::Stream);
CREMA_GLOBAL_POOL_INSTANTIATE(float)
CREMA_GLOBAL_POOL_INSTANTIATE(bf16_t)
CREMA_GLOBAL_POOL_INSTANTIATE(f16_t)
#undef CREMA_GLOBAL_POOL_INSTANTIATE

}  // namespace crema::kernels::cuda
