// A CUDA stream of the device's greatest priority (cudaStreamCreateWithPriority): where its
// kernels and the default priority's wait for SMs together, the GPU schedules its blocks first.
// Communication that overlaps compute runs there (apps/distributed/gradient_reducer.h: a bucket's
// copies and NCCL's kernel start once backward has produced it, instead of after every backward
// block already queued). Destroyed with gpu::destroy_stream (core/cuda_runtime.h).
#pragma once

#include "core/cuda_runtime.h"

namespace crema::gpu {

// On the current device (a gpu::DeviceGuard chooses it). Throws DeviceError in a build without
// CUDA, as every gpu:: call does.
Stream create_high_priority_stream();

}  // namespace crema::gpu
