#include <cuda_runtime.h>

#include <string>

#include "core/error.h"
#include "core/stream_priority.h"

namespace crema::gpu {

Stream create_high_priority_stream() {
  int least = 0, greatest = 0;
  cudaError_t status = cudaDeviceGetStreamPriorityRange(&least, &greatest);
  cudaStream_t stream = nullptr;
  // A blocking stream, as create_stream's: synchronous copies wait for its kernels.
  if (status == cudaSuccess)
    status = cudaStreamCreateWithPriority(&stream, cudaStreamDefault, greatest);
  if (status != cudaSuccess) {
    throw DeviceError(std::string("CUDA error in cudaStreamCreateWithPriority: ") +
                      cudaGetErrorString(status));
  }
  return stream;
}

}  // namespace crema::gpu
