// ReLU, CUDA versions: elementwise maps (kernels/common/map_cuda.cuh).
//   ReluVersion::scalar      one element per thread and iteration of a grid-stride loop.
//   ReluVersion::vectorized  four elements per thread through float4 loads and stores.
// Both compute the reference's selects exactly (a NaN fails `> 0` and takes the slope branch, as
// on the CPU), so GPU and CPU agree bit for bit. y may alias x, dx may alias dy.
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

void relu_forward(int64_t n, const float* x, float* y, float negative_slope, ReluVersion version,
                  gpu::Stream stream) {
  detail::launch_map<1>(n, x, nullptr, y, Forward{negative_slope}, version == ReluVersion::vectorized,
                        stream, "relu_forward");
}

void relu_backward(int64_t n, const float* y, const float* dy, float* dx, float negative_slope,
                   ReluVersion version, gpu::Stream stream) {
  detail::launch_map<2>(n, y, dy, dx, Backward{negative_slope}, version == ReluVersion::vectorized,
                        stream, "relu_backward");
}

}  // namespace crema::kernels::cuda
