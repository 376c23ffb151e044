// 2-D pooling, CUDA versions (PoolVersion, pooling.h):
//   per_element      one thread per output (forward) or input element (backward), either layout;
//   channel_vectors  nhwc with C a multiple of V = 16 / sizeof(T) (8 halves, 4 floats) and 16-byte
//                    aligned tensors: a thread owns V channels of one pixel, so every access moves
//                    16 bytes and the index and window arithmetic is paid once per V elements
//                    (per_element's backward of ResNet-50's max pool took 1.30 ms for 0.09 ms of
//                    traffic: README.md); other calls run per_element. Each channel does
//                    per_element's operations in its order: the same bits.
//
// Forward: one thread per output (n, c, p, q). It walks its window clipped to the input in
// row-major order with the reference's comparison (larger, or the first NaN), so ties and NaN
// resolve as on the CPU and the argmax is the same.
//
// Backward: one thread per input element (n, c, h, w), gathering instead of scattering. The
// windows that contain row h are those with p*stride - pad <= h < p*stride - pad + kernel, i.e.
//   p in [p0, p1),  p0 = h + pad < kernel ? 0 : (h + pad - kernel) / stride + 1,
//                   p1 = min((h + pad) / stride + 1, P)
// (columns likewise). Max: dx adds dy[p, q] of every such window whose argmax is this element;
// average: dy[p, q] / window_size of every such window. The additions run in (p, q) row-major
// order starting from 0, the order in which the CPU path's scatter reaches this element, so the
// result is the same bits, and no two threads write one element: no atomics, deterministic.
//
// Layouts: each kernel is a template on the layout. A thread's element index is split into
// (n, c, a, b) in memory order (nchw: b fastest; nhwc: c fastest, so a warp takes 32 channels of
// one pixel and its window reads are coalesced), and the (n, c) plane's element i (h*W + w,
// p*Q + q) lies at base + i * step: step 1 in nchw, C in nhwc (PlaneOf). The windows, the order
// of comparisons and sums, and the argmax values are the same in both layouts.
//
// Both are templates on the storage type T of x, y, dy, dx (float, bf16_t, f16_t): values are
// widened to float, compared and summed in float, and each output is rounded once (max pooling
// and its backward without overlapping windows are exact). argmax stays float32 in every case.
#include <type_traits>

#include "kernels/common/float16_cuda.cuh"
#include "kernels/common/map_cuda.cuh"
#include "kernels/pooling/pooling.h"

namespace crema::kernels::cuda {
namespace {

using detail::kMapThreads;
using detail::map_blocks;

// The geometry in 32-bit integers: extents, and indices within a plane (at most 2^24 elements in
// max mode, which the dispatch checks; far below 2^31 in any real average pooling).
struct Geometry {
  int C, H, W, P, Q, kernel_h, kernel_w, stride_h, stride_w, pad_h, pad_w;
  bool count_include_pad;
};

Geometry geometry32(const Pool2dGeometry& g) {
  return {int(g.C),        int(g.H),        int(g.W),        int(g.P),
          int(g.Q),        int(g.kernel_h), int(g.kernel_w), int(g.stride_h),
          int(g.stride_w), int(g.pad_h),    int(g.pad_w),    g.count_include_pad};
}

// Element idx of an [N, C, A, B] tensor in kLayout, as its logical position.
template <class Index>
struct Position {
  Index n;
  int c, a, b;
};

template <Layout kLayout, class Index>
__device__ inline Position<Index> position_of(Index idx, int C, int A, int B) {
  if constexpr (kLayout == Layout::nhwc) {
    const int c = int(idx % C);
    const Index pixel = idx / C;
    const int b = int(pixel % B);
    const Index rest = pixel / B;
    return {rest / A, c, int(rest % A), b};
  } else {
    const int b = int(idx % B);
    const Index rest = idx / B;
    const int a = int(rest % A);
    const Index plane = rest / A;
    return {plane / C, int(plane % C), a, b};
  }
}

// Plane (n, c) of an [N, C, area] tensor in kLayout: element i at p[i * step].
template <Layout kLayout, class T, class Index>
struct PlaneOf {
  T* p;
  int step;
  __device__ PlaneOf(T* data, const Position<Index>& at, int C, int area) {
    if constexpr (kLayout == Layout::nhwc) {
      p = data + at.n * Index(area) * C + at.c;
      step = C;
    } else {
      p = data + (at.n * C + at.c) * Index(area);
      step = 1;
    }
  }
  __device__ T& operator[](int i) const { return p[Index(i) * step]; }
};

// The average's divisor for the window [h0, h1) x [w0, w1) of the padded input (count_include_pad)
// or its part inside the input.
__device__ inline int window_size(const Geometry& g, int h0, int h1, int w0, int w1) {
  if (g.count_include_pad) return (h1 - h0) * (w1 - w0);
  return (min(h1, g.H) - max(h0, 0)) * (min(w1, g.W) - max(w0, 0));
}

// Index: the type of flat element indices (int32 when the tensors allow it: cheaper division).
template <class Index, PoolMode kMode, Layout kLayout, class T>
__global__ void pool_forward_kernel(Geometry g, Index total, const T* __restrict__ x,
                                    T* __restrict__ y, float* __restrict__ argmax) {
  for (Index idx = blockIdx.x * Index(blockDim.x) + threadIdx.x; idx < total;
       idx += Index(gridDim.x) * blockDim.x) {
    const Position<Index> at = position_of<kLayout>(idx, g.C, g.P, g.Q);
    const int p = at.a, q = at.b;
    const PlaneOf<kLayout, const T, Index> xp(x, at, g.C, g.H * g.W);  // [H, W]
    // The window in padded coordinates, then clipped to the input.
    const int h0 = p * g.stride_h - g.pad_h, w0 = q * g.stride_w - g.pad_w;
    const int h1 = min(h0 + g.kernel_h, g.H + g.pad_h), w1 = min(w0 + g.kernel_w, g.W + g.pad_w);
    const int hs = max(h0, 0), he = min(h1, g.H), ws = max(w0, 0), we = min(w1, g.W);
    if constexpr (kMode == PoolMode::max) {
      int best = hs * g.W + ws;
      float m = to_float(xp[best]);
      for (int h = hs; h < he; ++h) {
        for (int w = ws; w < we; ++w) {
          const float v = to_float(xp[h * g.W + w]);
          if (v > m || (isnan(v) && !isnan(m))) {  // larger, or the first NaN
            m = v;
            best = h * g.W + w;
          }
        }
      }
      y[idx] = from_float<T>(m);
      if (argmax != nullptr) argmax[idx] = float(best);
    } else {
      float sum = 0.0f;
      for (int h = hs; h < he; ++h) {
        for (int w = ws; w < we; ++w) sum += to_float(xp[h * g.W + w]);
      }
      y[idx] = from_float<T>(sum / float(window_size(g, h0, h1, w0, w1)));
    }
  }
}

// The windows [first, last) along one axis that contain input coordinate `at`.
__device__ inline void windows_containing(int at, int kernel, int stride, int pad, int outputs,
                                          int& first, int& last) {
  first = at + pad < kernel ? 0 : (at + pad - kernel) / stride + 1;
  last = min((at + pad) / stride + 1, outputs);
}

template <class Index, PoolMode kMode, Layout kLayout, class T>
__global__ void pool_backward_kernel(Geometry g, Index total, const T* __restrict__ dy,
                                     const float* __restrict__ argmax, T* __restrict__ dx) {
  for (Index idx = blockIdx.x * Index(blockDim.x) + threadIdx.x; idx < total;
       idx += Index(gridDim.x) * blockDim.x) {
    const Position<Index> at = position_of<kLayout>(idx, g.C, g.H, g.W);
    const int h = at.a, w = at.b;
    int p0, p1, q0, q1;
    windows_containing(h, g.kernel_h, g.stride_h, g.pad_h, g.P, p0, p1);
    windows_containing(w, g.kernel_w, g.stride_w, g.pad_w, g.Q, q0, q1);
    const PlaneOf<kLayout, const T, Index> dyp(dy, at, g.C, g.P * g.Q);  // [P, Q]
    float acc = 0.0f;
    if constexpr (kMode == PoolMode::max) {
      const PlaneOf<kLayout, const float, Index> ap(argmax, at, g.C, g.P * g.Q);
      const float me = float(h * g.W + w);
      for (int p = p0; p < p1; ++p) {
        for (int q = q0; q < q1; ++q) {
          if (ap[p * g.Q + q] == me) acc += to_float(dyp[p * g.Q + q]);
        }
      }
    } else {
      for (int p = p0; p < p1; ++p) {
        const int h0 = p * g.stride_h - g.pad_h, h1 = min(h0 + g.kernel_h, g.H + g.pad_h);
        for (int q = q0; q < q1; ++q) {
          const int w0 = q * g.stride_w - g.pad_w, w1 = min(w0 + g.kernel_w, g.W + g.pad_w);
          acc += to_float(dyp[p * g.Q + q]) / float(window_size(g, h0, h1, w0, w1));
        }
      }
    }
    dx[idx] = from_float<T>(acc);
  }
}

// channel_vectors: element idx * V of an nhwc tensor [N, A, B, C] starts the vector of V channels
// c0 .. c0 + V - 1 of pixel (n, a, b); C is a multiple of V.
template <class Index>
__device__ inline Position<Index> vector_position_of(Index idx, int vectors_per_pixel, int A, int B,
                                                     int V) {
  const int c0 = int(idx % vectors_per_pixel) * V;
  const Index pixel = idx / vectors_per_pixel;
  const int b = int(pixel % B);
  const Index rest = pixel / B;
  return {rest / A, c0, int(rest % A), b};
}

template <class Index, PoolMode kMode, class T>
__global__ void pool_forward_vectors(Geometry g, Index vectors, const T* __restrict__ x,
                                     T* __restrict__ y, float* __restrict__ argmax) {
  constexpr int V = kPerVector<T>;
  for (Index idx = blockIdx.x * Index(blockDim.x) + threadIdx.x; idx < vectors;
       idx += Index(gridDim.x) * blockDim.x) {
    const Position<Index> at = vector_position_of(idx, g.C / V, g.P, g.Q, V);
    const T* xn = x + at.n * Index(g.H * g.W) * g.C + at.c;  // [H, W, C] from channel c0
    const int h0 = at.a * g.stride_h - g.pad_h, w0 = at.b * g.stride_w - g.pad_w;
    const int h1 = min(h0 + g.kernel_h, g.H + g.pad_h), w1 = min(w0 + g.kernel_w, g.W + g.pad_w);
    const int hs = max(h0, 0), he = min(h1, g.H), ws = max(w0, 0), we = min(w1, g.W);
    float out[V];
    if constexpr (kMode == PoolMode::max) {
      float best[V], v[V];
      load_floats<V>(xn, Index(hs * g.W + ws) * g.C, out);
#pragma unroll
      for (int e = 0; e < V; ++e) best[e] = float(hs * g.W + ws);
      for (int h = hs; h < he; ++h) {
        for (int w = ws; w < we; ++w) {
          load_floats<V>(xn, Index(h * g.W + w) * g.C, v);
#pragma unroll
          for (int e = 0; e < V; ++e) {
            if (v[e] > out[e] || (isnan(v[e]) && !isnan(out[e]))) {  // larger, or the first NaN
              out[e] = v[e];
              best[e] = float(h * g.W + w);
            }
          }
        }
      }
      if (argmax != nullptr) store_floats<V>(argmax, int64_t(idx) * V, best);
    } else {
      float v[V];
#pragma unroll
      for (int e = 0; e < V; ++e) out[e] = 0.0f;
      for (int h = hs; h < he; ++h) {
        for (int w = ws; w < we; ++w) {
          load_floats<V>(xn, Index(h * g.W + w) * g.C, v);
#pragma unroll
          for (int e = 0; e < V; ++e) out[e] += v[e];
        }
      }
      const float divisor = float(window_size(g, h0, h1, w0, w1));
#pragma unroll
      for (int e = 0; e < V; ++e) out[e] /= divisor;
    }
    store_floats<V>(y, int64_t(idx) * V, out);
  }
}

template <class Index, PoolMode kMode, class T>
__global__ void pool_backward_vectors(Geometry g, Index vectors, const T* __restrict__ dy,
                                      const float* __restrict__ argmax, T* __restrict__ dx) {
  constexpr int V = kPerVector<T>;
  for (Index idx = blockIdx.x * Index(blockDim.x) + threadIdx.x; idx < vectors;
       idx += Index(gridDim.x) * blockDim.x) {
    const Position<Index> at = vector_position_of(idx, g.C / V, g.H, g.W, V);
    const int h = at.a, w = at.b;
    int p0, p1, q0, q1;
    windows_containing(h, g.kernel_h, g.stride_h, g.pad_h, g.P, p0, p1);
    windows_containing(w, g.kernel_w, g.stride_w, g.pad_w, g.Q, q0, q1);
    const Index plane = at.n * Index(g.P * g.Q) * g.C + at.c;  // dy, argmax [P, Q, C] at c0
    float acc[V], d[V];
#pragma unroll
    for (int e = 0; e < V; ++e) acc[e] = 0.0f;
    if constexpr (kMode == PoolMode::max) {
      const float me = float(h * g.W + w);
      float a[V];
      for (int p = p0; p < p1; ++p) {
        for (int q = q0; q < q1; ++q) {
          const Index at_pq = plane + Index(p * g.Q + q) * g.C;
          load_floats<V>(argmax, at_pq, a);
          load_floats<V>(dy, at_pq, d);
#pragma unroll
          for (int e = 0; e < V; ++e) {
            if (a[e] == me) acc[e] += d[e];
          }
        }
      }
    } else {
      for (int p = p0; p < p1; ++p) {
        const int h0 = p * g.stride_h - g.pad_h, h1 = min(h0 + g.kernel_h, g.H + g.pad_h);
        for (int q = q0; q < q1; ++q) {
          const int w0 = q * g.stride_w - g.pad_w, w1 = min(w0 + g.kernel_w, g.W + g.pad_w);
          const float divisor = float(window_size(g, h0, h1, w0, w1));
          load_floats<V>(dy, plane + Index(p * g.Q + q) * g.C, d);
#pragma unroll
          for (int e = 0; e < V; ++e) acc[e] += d[e] / divisor;
        }
      }
    }
    store_floats<V>(dx, int64_t(idx) * V, acc);
  }
}

// Whether channel_vectors runs this call (else per_element does).
template <class T>
bool runs_vectors(PoolVersion version, Layout layout, int64_t C, const void* a, const void* b,
                  const void* argmax) {
  return version == PoolVersion::channel_vectors && layout == Layout::nhwc &&
         C % kPerVector<T> == 0 && detail::aligned16(a) && detail::aligned16(b) &&
         detail::aligned16(argmax);
}

template <class Index, Layout kLayout, class T>
void launch_forward(const Geometry& g, int64_t total, PoolMode mode, const T* x, T* y,
                    float* argmax, bool vectors, gpu::Stream stream) {
  if (vectors) {
    const int64_t n = total / kPerVector<T>;
    if (mode == PoolMode::max) {
      pool_forward_vectors<Index, PoolMode::max>
          <<<map_blocks(n), kMapThreads, 0, stream>>>(g, Index(n), x, y, argmax);
    } else {
      pool_forward_vectors<Index, PoolMode::average>
          <<<map_blocks(n), kMapThreads, 0, stream>>>(g, Index(n), x, y, nullptr);
    }
  } else if (mode == PoolMode::max) {
    pool_forward_kernel<Index, PoolMode::max, kLayout>
        <<<map_blocks(total), kMapThreads, 0, stream>>>(g, Index(total), x, y, argmax);
  } else {
    pool_forward_kernel<Index, PoolMode::average, kLayout>
        <<<map_blocks(total), kMapThreads, 0, stream>>>(g, Index(total), x, y, nullptr);
  }
  gpu::check_launch("pool2d_forward");
}

template <class Index, Layout kLayout, class T>
void launch_backward(const Geometry& g, int64_t total, PoolMode mode, const T* dy,
                     const float* argmax, T* dx, bool vectors, gpu::Stream stream) {
  if (vectors) {
    const int64_t n = total / kPerVector<T>;
    if (mode == PoolMode::max) {
      pool_backward_vectors<Index, PoolMode::max>
          <<<map_blocks(n), kMapThreads, 0, stream>>>(g, Index(n), dy, argmax, dx);
    } else {
      pool_backward_vectors<Index, PoolMode::average>
          <<<map_blocks(n), kMapThreads, 0, stream>>>(g, Index(n), dy, nullptr, dx);
    }
  } else if (mode == PoolMode::max) {
    pool_backward_kernel<Index, PoolMode::max, kLayout>
        <<<map_blocks(total), kMapThreads, 0, stream>>>(g, Index(total), dy, argmax, dx);
  } else {
    pool_backward_kernel<Index, PoolMode::average, kLayout>
        <<<map_blocks(total), kMapThreads, 0, stream>>>(g, Index(total), dy, nullptr, dx);
  }
  gpu::check_launch("pool2d_backward");
}

// f(Index{}, layout constant): the launch for the index type the sizes allow and the layout.
template <class F>
void with_index_and_layout(bool int32, Layout layout, F f) {
  const auto nchw = std::integral_constant<Layout, Layout::nchw>{};
  const auto nhwc = std::integral_constant<Layout, Layout::nhwc>{};
  if (int32) {
    layout == Layout::nhwc ? f(int32_t{}, nhwc) : f(int32_t{}, nchw);
  } else {
    layout == Layout::nhwc ? f(int64_t{}, nhwc) : f(int64_t{}, nchw);
  }
}

}  // namespace

template <class T>
void pool2d_forward(const Pool2dGeometry& g, PoolMode mode, const T* x, T* y, float* argmax,
                    Layout layout, PoolVersion version, gpu::Stream stream) {
  const int64_t total = g.N * g.C * g.P * g.Q;
  if (total == 0) return;
  const Geometry g32 = geometry32(g);
  const bool int32 =
      detail::int32_indexable(total) && detail::int32_indexable(g.N * g.C * g.H * g.W);
  const bool vectors = runs_vectors<T>(version, layout, g.C, x, y, argmax);
  with_index_and_layout(int32, layout, [&](auto index, auto order) {
    launch_forward<decltype(index), decltype(order)::value>(g32, total, mode, x, y, argmax, vectors,
                                                            stream);
  });
}

template <class T>
void pool2d_backward(const Pool2dGeometry& g, PoolMode mode, const T* dy, const float* argmax,
                     T* dx, Layout layout, PoolVersion version, gpu::Stream stream) {
  const int64_t total = g.N * g.C * g.H * g.W;
  if (total == 0) return;
  const Geometry g32 = geometry32(g);
  const bool int32 =
      detail::int32_indexable(total) && detail::int32_indexable(g.N * g.C * g.P * g.Q);
  const bool vectors = runs_vectors<T>(version, layout, g.C, dy, dx, argmax);
  with_index_and_layout(int32, layout, [&](auto index, auto order) {
    launch_backward<decltype(index), decltype(order)::value>(g32, total, mode, dy, argmax, dx,
                                                             vectors, stream);
  });
}

#define CREMA_POOLING_INSTANTIATE(T)                                                             \
  template void pool2d_forward<T>(const Pool2dGeometry&, PoolMode, const T*, T*, float*, Layout, \
                                  PoolVersion, gpu::Stream);                                     \
  template void pool2d_backward<T>(const Pool2dGeometry&, PoolMode, const T*, const float*, T*,  \
                                   Layout, PoolVersion, gpu::Stream);
CREMA_POOLING_INSTANTIATE(float)
CREMA_POOLING_INSTANTIATE(bf16_t)
CREMA_POOLING_INSTANTIATE(f16_t)
#undef CREMA_POOLING_INSTANTIATE

}  // namespace crema::kernels::cuda
