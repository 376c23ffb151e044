#include <cuda_runtime.h>

#include <string>

#include "core/error.h"
#include "core/side_streams.h"

namespace crema::gpu {
namespace {

Stream created(cudaError_t status, cudaStream_t stream, const char* call) {
  if (status != cudaSuccess) {
    throw DeviceError(std::string("CUDA error in ") + call + ": " + cudaGetErrorString(status));
  }
  return stream;
}

int greatest_priority() {
  int least = 0, greatest = 0;
  const cudaError_t status = cudaDeviceGetStreamPriorityRange(&least, &greatest);
  created(status, nullptr, "cudaDeviceGetStreamPriorityRange");
  return greatest;
}

}  // namespace

Stream create_high_priority_stream() {
  cudaStream_t stream = nullptr;
  const cudaError_t status =
      cudaStreamCreateWithPriority(&stream, cudaStreamDefault, greatest_priority());
  return created(status, stream, "cudaStreamCreateWithPriority");
}

Stream create_nonblocking_stream() {
  cudaStream_t stream = nullptr;
  const cudaError_t status = cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking);
  return created(status, stream, "cudaStreamCreateWithFlags");
}

}  // namespace crema::gpu
