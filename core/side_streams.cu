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

}  // namespace

Stream create_high_priority_stream() {
  int least = 0, greatest = 0;
  cudaError_t status = cudaDeviceGetStreamPriorityRange(&least, &greatest);
  cudaStream_t stream = nullptr;
  if (status == cudaSuccess)
    status = cudaStreamCreateWithPriority(&stream, cudaStreamDefault, greatest);
  return created(status, stream, "cudaStreamCreateWithPriority");
}

Stream create_nonblocking_stream() {
  cudaStream_t stream = nullptr;
  const cudaError_t status = cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking);
  return created(status, stream, "cudaStreamCreateWithFlags");
}

}  // namespace crema::gpu
