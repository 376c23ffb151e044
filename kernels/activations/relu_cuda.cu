// ReLU, CUDA versions: elementwise maps (kernels/common/map_cuda.cuh).
//   ReluVersion::scalar      one element per thread and iteration of a grid-stride loop.
//   ReluVersion::vectorized  16 bytes per thread and access: 4 floats, or 8 bf16 / f16 elements.
// Both compute the reference's selects exactly (a NaN fails `> 0` and takes the slope branch, as
// on the CPU), so GPU and CPU agree bit for bit in f32. In bf16 and f16 the arithmetic is float
// and the output is rounded once (exact for slope 0 and for the dy that passes through). y may
// alias x, dx may alias dy.
#include "kernels/activations/relu.h"
#include "kernels/common/map_cuda.cuh"

namespace crema::kernels::cuda {
namespace {

struct Forward {
  float slope;
  __device__ float operator()(float x) const { return x > 0.0f ? x : slope * x; }
};

struct Backward {
  float slope;
  __device__ float operator()(float y, float dy) const { return y > 0.0f ? dy : slope * dy; }
};

}  // namespace

template <class T>
void relu_forward(int64_t n, const T* x, T* y, float negative_slope, ReluVersion version,
                  gpu::Stream stream) {
  detail::launch_map<1>(n, x, nullptr, y, Forward{negative_slope},
                        version == ReluVersion::vectorized, stream, "relu_forward");
}

template <class T>
void relu_backward(int64_t n, const T* y, const T* dy, T* dx, float negative_slope,
                   ReluVersion version, gpu::Stream stream) {
  detail::launch_map<2>(n, y, dy, dx, Backward{negative_slope}, version == ReluVersion::vectorized,
                        stream, "relu_backward");
}

#define CREMA_RELU_INSTANTIATE(T)                                                        \
  template void relu_forward<T>(int64_t, const T*, T*, float, ReluVersion, gpu::Stream); \
  template void relu_backward<T>(int64_t, const T*, const T*, T*, float, ReluVersion, gpu::Stream);
CREMA_RELU_INSTANTIATE(float)
CREMA_RELU_INSTANTIATE(bf16_t)
CREMA_RELU_INSTANTIATE(f16_t)
#undef CREMA_RELU_INSTANTIATE

}  // namespace crema::kernels::cuda
