// Eltwise, CUDA: one version. One thread per element (grid-stride), the input pointers (and
// coefficients) passed by value in the kernel's parameters, up to kMaxInputsPerLaunch per launch.
// A launch for inputs [first, first + count) starts from the reference's initial value (first
// launch) or from what the previous launch left in y (later ones), so every element sees the
// reference's operations in the reference's order. The products and sums are rounded one
// operation at a time (__fmul_rn, __fadd_rn: no fused multiply-add), as on the CPU.
#include <cmath>

#include "kernels/common/map_cuda.cuh"
#include "kernels/elementwise/eltwise.h"

namespace crema::kernels::cuda {
namespace {

struct Inputs {
  const float* x[kMaxInputsPerLaunch];
  float coeff[kMaxInputsPerLaunch];
  int first;  // index of x[0] among all K inputs
  int count;
};

template <class Index>
__global__ void sum_kernel(Index n, Inputs in, bool resume, float* __restrict__ y) {
  for (Index e = Index(blockIdx.x) * Index(blockDim.x) + Index(threadIdx.x); e < n;
       e += Index(gridDim.x) * Index(blockDim.x)) {
    float acc = resume ? y[e] : 0.0f;
#pragma unroll
    for (int j = 0; j < kMaxInputsPerLaunch; ++j) {
      if (j < in.count) acc = __fadd_rn(acc, __fmul_rn(in.coeff[j], in.x[j][e]));
    }
    y[e] = acc;
  }
}

// y = (resume ? y : init ? init : 1) * prod of the launch's inputs other than `skip`.
template <class Index>
__global__ void prod_kernel(Index n, Inputs in, int skip, const float* __restrict__ init,
                            bool resume, float* __restrict__ y) {
  for (Index e = Index(blockIdx.x) * Index(blockDim.x) + Index(threadIdx.x); e < n;
       e += Index(gridDim.x) * Index(blockDim.x)) {
    float acc = resume ? y[e] : (init != nullptr ? init[e] : 1.0f);
#pragma unroll
    for (int j = 0; j < kMaxInputsPerLaunch; ++j) {
      if (j < in.count && in.first + j != skip) acc = __fmul_rn(acc, in.x[j][e]);
    }
    y[e] = acc;
  }
}

template <class Index>
__global__ void max_kernel(Index n, Inputs in, bool resume, float* __restrict__ y,
                           float* __restrict__ argmax) {
  for (Index e = Index(blockIdx.x) * Index(blockDim.x) + Index(threadIdx.x); e < n;
       e += Index(gridDim.x) * Index(blockDim.x)) {
    float best = resume ? y[e] : in.x[0][e];
    float arg = resume ? argmax[e] : float(in.first);
#pragma unroll
    for (int j = 0; j < kMaxInputsPerLaunch; ++j) {
      if (j < in.count && (resume || j > 0)) {
        const float v = in.x[j][e];
        if (v > best || (isnan(v) && !isnan(best))) {
          best = v;
          arg = float(in.first + j);
        }
      }
    }
    y[e] = best;
    argmax[e] = arg;
  }
}

struct RouteToIndex {
  float index;
  __device__ float operator()(float dy, float argmax) const { return argmax == index ? dy : 0.0f; }
};

// Calls launch_one(inputs, resume) for each group of up to kMaxInputsPerLaunch inputs.
template <class LaunchOne>
void for_each_launch(int K, const float* const* x, const float* coeff, LaunchOne launch_one) {
  for (int first = 0; first < K; first += kMaxInputsPerLaunch) {
    Inputs in{};
    in.first = first;
    in.count = K - first < kMaxInputsPerLaunch ? K - first : kMaxInputsPerLaunch;
    for (int j = 0; j < in.count; ++j) {
      in.x[j] = x[first + j];
      in.coeff[j] = coeff != nullptr ? coeff[first + j] : 1.0f;
    }
    launch_one(in, first > 0);
  }
}

void launch_product(int64_t n, int K, const float* const* x, int skip, const float* init, float* y,
                    gpu::Stream stream, const char* what) {
  if (n == 0) return;
  const int blocks = detail::map_blocks(n);
  for_each_launch(K, x, nullptr, [&](const Inputs& in, bool resume) {
    if (detail::int32_indexable(n)) {
      prod_kernel<int32_t>
          <<<blocks, detail::kMapThreads, 0, stream>>>(int32_t(n), in, skip, init, resume, y);
    } else {
      prod_kernel<int64_t>
          <<<blocks, detail::kMapThreads, 0, stream>>>(n, in, skip, init, resume, y);
    }
    gpu::check_launch(what);
  });
}

}  // namespace

void eltwise_sum(int64_t n, int K, const float* const* x, const float* coeff, float* y,
                 gpu::Stream stream) {
  if (n == 0) return;
  const int blocks = detail::map_blocks(n);
  for_each_launch(K, x, coeff, [&](const Inputs& in, bool resume) {
    if (detail::int32_indexable(n)) {
      sum_kernel<int32_t><<<blocks, detail::kMapThreads, 0, stream>>>(int32_t(n), in, resume, y);
    } else {
      sum_kernel<int64_t><<<blocks, detail::kMapThreads, 0, stream>>>(n, in, resume, y);
    }
    gpu::check_launch("eltwise_sum");
  });
}

void eltwise_prod(int64_t n, int K, const float* const* x, float* y, gpu::Stream stream) {
  launch_product(n, K, x, -1, nullptr, y, stream, "eltwise_prod");
}

void eltwise_prod_backward(int64_t n, int K, const float* const* x, int i, const float* dy,
                           float* dx, gpu::Stream stream) {
  launch_product(n, K, x, i, dy, dx, stream, "eltwise_prod_backward");
}

void eltwise_max(int64_t n, int K, const float* const* x, float* y, float* argmax,
                 gpu::Stream stream) {
  if (n == 0) return;
  const int blocks = detail::map_blocks(n);
  for_each_launch(K, x, nullptr, [&](const Inputs& in, bool resume) {
    if (detail::int32_indexable(n)) {
      max_kernel<int32_t>
          <<<blocks, detail::kMapThreads, 0, stream>>>(int32_t(n), in, resume, y, argmax);
    } else {
      max_kernel<int64_t><<<blocks, detail::kMapThreads, 0, stream>>>(n, in, resume, y, argmax);
    }
    gpu::check_launch("eltwise_max");
  });
}

void eltwise_max_backward(int64_t n, int i, const float* dy, const float* argmax, float* dx,
                          gpu::Stream stream) {
  detail::launch_map<2>(n, dy, argmax, dx, RouteToIndex{float(i)}, true, stream,
                        "eltwise_max_backward");
}

}  // namespace crema::kernels::cuda
