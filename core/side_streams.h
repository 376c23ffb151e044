// CUDA streams beside a Context's own (core/context.h), for work that overlaps the training
// stream's. Destroyed with gpu::destroy_stream (core/cuda_runtime.h). Both are created on the
// current device (a gpu::DeviceGuard chooses it) and throw DeviceError in a build without CUDA,
// as every gpu:: call does.
#pragma once

#include "core/cuda_runtime.h"

namespace crema::gpu {

// A stream of the device's greatest priority (cudaStreamCreateWithPriority): where its kernels
// and the default priority's wait for SMs together, the GPU schedules its blocks first.
// Communication that overlaps compute runs there (apps/distributed/gradient_reducer.h: a bucket's
// copies and NCCL's kernel start once backward has produced it, instead of after every backward
// block already queued). Blocking, as create_stream's: synchronous copies wait for its kernels.
Stream create_high_priority_stream();

// A non-blocking stream (cudaStreamNonBlocking): the legacy stream does not wait for it, nor it
// for the legacy stream. For work that orders itself -- with events, or by synchronizing its own
// stream before anyone reads its results -- and that the synchronous copies the training loop
// makes a few times a second (Tensor::to_vector, copy_from: the legacy stream) need not wait for:
// the data loader's GPU decoders (data/gpu/) and the batches' host-to-device copies
// (apps/training/input_feeder.h).
Stream create_nonblocking_stream();

}  // namespace crema::gpu
