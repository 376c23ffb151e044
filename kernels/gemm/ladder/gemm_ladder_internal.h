// Launchers of the ladder's rungs that live in their own files, called by ladder::sgemm
// (gemm_ladder_cuda.cu). Arguments as production's launchers take them (gemm_cuda_internal.h).
#pragma once

#include "core/cuda_runtime.h"
#include "kernels/gemm/gemm_cuda_internal.h"

namespace crema::kernels::cuda::detail {

// v5: fp32 SIMT, warp-shaped thread groups, double-buffered shared memory fed from registers
//     (gemm_warp_tiles_cuda.cu).
void sgemm_warp_tiles(const GemmArgs& args, gpu::Stream stream);

}  // namespace crema::kernels::cuda::detail
