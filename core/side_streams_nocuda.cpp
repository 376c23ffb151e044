// A build without CUDA: no stream to make. Each function throws create_stream's error (the one
// message core/cuda_runtime_nocuda.cpp gives for every use of the GPU).
#include "core/side_streams.h"

namespace crema::gpu {

Stream create_high_priority_stream() {
  return create_stream();
}

Stream create_nonblocking_stream() {
  return create_stream();
}

}  // namespace crema::gpu
