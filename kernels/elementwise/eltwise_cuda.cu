// Eltwise, CUDA: one version, templated on the storage type T (float, bf16_t, f16_t). Each thread
// takes a group of G elements: G = 16 bytes of T (4 floats, 8 halves) through vector loads and
// stores when every pointer is 16-byte aligned, else G = 1; the n % G tail goes one element per
// thread of block 0. The input pointers (and coefficients) are passed by value in the kernel's
// parameters, up to kMaxInputsPerLaunch per launch. A launch for inputs [first, first + count)
// starts from the reference's initial value (first launch) or from what the previous launch left
// in y (later ones), so every element sees the reference's operations in the reference's order.
// The arithmetic is float, rounded one operation at a time (__fmul_rn, __fadd_rn: no fused
// multiply-add), as on the CPU; in bf16 and f16, y is rounded once per launch (once for K <= 8).
#include <cmath>
#include <initializer_list>

#include "kernels/common/float16_cuda.cuh"
#include "kernels/common/map_cuda.cuh"
#include "kernels/elementwise/eltwise.h"

namespace crema::kernels::cuda {
namespace {

template <class T>
struct Inputs {
  const T* x[kMaxInputsPerLaunch];
  float coeff[kMaxInputsPerLaunch];
  int first;  // index of x[0] among all K inputs
  int count;
};

// Runs body.run<G>(i) for each group of G elements starting at i, then body.run<1> on the tail.
template <int G, class Index, class Body>
__global__ void grouped(Index n, Body body) {
  const Index groups = n / G;
  for (Index g = Index(blockIdx.x) * Index(blockDim.x) + Index(threadIdx.x); g < groups;
       g += Index(gridDim.x) * Index(blockDim.x)) {
    body.template run<G>(int64_t(g) * G);
  }
  if constexpr (G > 1) {
    const Index tail = n - groups * G;
    if (blockIdx.x == 0 && Index(threadIdx.x) < tail) {
      body.template run<1>(int64_t(groups) * G + threadIdx.x);
    }
  }
}

template <class T>
struct Sum {
  Inputs<T> in;
  bool resume;
  T* y;
  template <int G>
  __device__ void run(int64_t i) const {
    float acc[G] = {}, v[G];
    if (resume) load_floats(y, i, acc);
#pragma unroll
    for (int j = 0; j < kMaxInputsPerLaunch; ++j) {
      if (j < in.count) {
        load_floats(in.x[j], i, v);
#pragma unroll
        for (int k = 0; k < G; ++k) acc[k] = __fadd_rn(acc[k], __fmul_rn(in.coeff[j], v[k]));
      }
    }
    store_floats(y, i, acc);
  }
};

// y = (resume ? y : init ? init : 1) * prod of the launch's inputs other than `skip`.
template <class T>
struct Product {
  Inputs<T> in;
  int skip;
  const T* init;
  bool resume;
  T* y;
  template <int G>
  __device__ void run(int64_t i) const {
    float acc[G], v[G];
    if (resume) {
      load_floats(y, i, acc);
    } else if (init != nullptr) {
      load_floats(init, i, acc);
    } else {
#pragma unroll
      for (int k = 0; k < G; ++k) acc[k] = 1.0f;
    }
#pragma unroll
    for (int j = 0; j < kMaxInputsPerLaunch; ++j) {
      if (j < in.count && in.first + j != skip) {
        load_floats(in.x[j], i, v);
#pragma unroll
        for (int k = 0; k < G; ++k) acc[k] = __fmul_rn(acc[k], v[k]);
      }
    }
    store_floats(y, i, acc);
  }
};

template <class T>
struct Max {
  Inputs<T> in;
  bool resume;
  T* y;
  T* argmax;
  template <int G>
  __device__ void run(int64_t i) const {
    float best[G], arg[G], v[G];
    if (resume) {
      load_floats(y, i, best);
      load_floats(argmax, i, arg);
    } else {
      load_floats(in.x[0], i, best);
#pragma unroll
      for (int k = 0; k < G; ++k) arg[k] = float(in.first);
    }
#pragma unroll
    for (int j = 0; j < kMaxInputsPerLaunch; ++j) {
      if (j < in.count && (resume || j > 0)) {
        load_floats(in.x[j], i, v);
#pragma unroll
        for (int k = 0; k < G; ++k) {
          if (v[k] > best[k] || (isnan(v[k]) && !isnan(best[k]))) {
            best[k] = v[k];
            arg[k] = float(in.first + j);
          }
        }
      }
    }
    store_floats(y, i, best);  // a max is one of the inputs: exact in T
    store_floats(argmax, i, arg);
  }
};

struct RouteToIndex {
  float index;
  __device__ float operator()(float dy, float argmax) const { return argmax == index ? dy : 0.0f; }
};

// Launches body over n elements in groups of 16 bytes where `aligned`, else one by one.
template <class T, class Body>
void launch_grouped(int64_t n, bool aligned, const Body& body, const char* what,
                    gpu::Stream stream) {
  constexpr int V = kPerVector<T>;
  const int blocks = detail::map_blocks(aligned ? n / V : n);
  if (detail::int32_indexable(n)) {
    if (aligned) {
      grouped<V><<<blocks, detail::kMapThreads, 0, stream>>>(int32_t(n), body);
    } else {
      grouped<1><<<blocks, detail::kMapThreads, 0, stream>>>(int32_t(n), body);
    }
  } else if (aligned) {
    grouped<V><<<blocks, detail::kMapThreads, 0, stream>>>(n, body);
  } else {
    grouped<1><<<blocks, detail::kMapThreads, 0, stream>>>(n, body);
  }
  gpu::check_launch(what);
}

// Calls launch_one(inputs, resume) for each group of up to kMaxInputsPerLaunch inputs.
template <class T, class LaunchOne>
void for_each_launch(int K, const T* const* x, const float* coeff, LaunchOne launch_one) {
  for (int first = 0; first < K; first += kMaxInputsPerLaunch) {
    Inputs<T> in{};
    in.first = first;
    in.count = K - first < kMaxInputsPerLaunch ? K - first : kMaxInputsPerLaunch;
    for (int j = 0; j < in.count; ++j) {
      in.x[j] = x[first + j];
      in.coeff[j] = coeff != nullptr ? coeff[first + j] : 1.0f;
    }
    launch_one(in, first > 0);
  }
}

// Whether every input and `others` are 16-byte aligned.
template <class T>
bool all_aligned(int K, const T* const* x, std::initializer_list<const void*> others) {
  for (int j = 0; j < K; ++j) {
    if (!detail::aligned16(x[j])) return false;
  }
  for (const void* p : others) {
    if (!detail::aligned16(p)) return false;
  }
  return true;
}

template <class T>
void launch_product(int64_t n, int K, const T* const* x, int skip, const T* init, T* y,
                    gpu::Stream stream, const char* what) {
  if (n == 0) return;
  const bool aligned = all_aligned(K, x, {init, y});
  for_each_launch(K, x, nullptr, [&](const Inputs<T>& in, bool resume) {
    launch_grouped<T>(n, aligned, Product<T>{in, skip, init, resume, y}, what, stream);
  });
}

}  // namespace

template <class T>
void eltwise_sum(int64_t n, int K, const T* const* x, const float* coeff, T* y,
                 gpu::Stream stream) {
  if (n == 0) return;
  const bool aligned = all_aligned(K, x, {y});
  for_each_launch(K, x, coeff, [&](const Inputs<T>& in, bool resume) {
    launch_grouped<T>(n, aligned, Sum<T>{in, resume, y}, "eltwise_sum", stream);
  });
}

template <class T>
void eltwise_prod(int64_t n, int K, const T* const* x, T* y, gpu::Stream stream) {
  launch_product<T>(n, K, x, -1, nullptr, y, stream, "eltwise_prod");
}

template <class T>
void eltwise_prod_backward(int64_t n, int K, const T* const* x, int i, const T* dy, T* dx,
                           gpu::Stream stream) {
  launch_product<T>(n, K, x, i, dy, dx, stream, "eltwise_prod_backward");
}

template <class T>
void eltwise_max(int64_t n, int K, const T* const* x, T* y, T* argmax, gpu::Stream stream) {
  if (n == 0) return;
  const bool aligned = all_aligned(K, x, {y, argmax});
  for_each_launch(K, x, nullptr, [&](const Inputs<T>& in, bool resume) {
    launch_grouped<T>(n, aligned, Max<T>{in, resume, y, argmax}, "eltwise_max", stream);
  });
}

template <class T>
void eltwise_max_backward(int64_t n, int i, const T* dy, const T* argmax, T* dx,
                          gpu::Stream stream) {
  detail::launch_map<2>(n, dy, argmax, dx, RouteToIndex{float(i)}, true, stream,
                        "eltwise_max_backward");
}

#define CREMA_ELTWISE_INSTANTIATE(T)                                                          \
  template void eltwise_sum<T>(int64_t, int, const T* const*, const float*, T*, gpu::Stream); \
  template void eltwise_prod<T>(int64_t, int, const T* const*, T*, gpu::Stream);              \
  template void eltwise_prod_backward<T>(int64_t, int, const T* const*, int, const T*, T*,    \
                                         gpu::Stream);                                        \
  template void eltwise_max<T>(int64_t, int, const T* const*, T*, T*, gpu::Stream);           \
  template void eltwise_max_backward<T>(int64_t, int, const T*, const T*, T*, gpu::Stream);
CREMA_ELTWISE_INSTANTIATE(float)
CREMA_ELTWISE_INSTANTIATE(bf16_t)
CREMA_ELTWISE_INSTANTIATE(f16_t)
#undef CREMA_ELTWISE_INSTANTIATE

}  // namespace crema::kernels::cuda
