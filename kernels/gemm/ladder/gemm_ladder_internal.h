// Launchers of the ladder's rungs that live in their own files, called by ladder::sgemm
// (gemm_ladder_cuda.cu). Arguments as production's launchers take them (gemm_cuda_internal.h:
// checked, M, N, K >= 1, alpha != 0).
#pragma once

#include "core/cuda_runtime.h"
#include "kernels/gemm/gemm_cuda_internal.h"

namespace crema::kernels::cuda::detail {

// s4 column_tiles, s5 micro_tiles, s6 vector_loads (gemm_register_tiles_cuda.cu).
void sgemm_column_tiles(const GemmArgs& args, gpu::Stream stream);
void sgemm_micro_tiles(const GemmArgs& args, gpu::Stream stream);
void sgemm_vector_loads(const GemmArgs& args, gpu::Stream stream);

// s8 double_buffer, s9 warp_tiles, s10 grouped_tiles (gemm_double_buffer_cuda.cu): one loop with
// two shared slabs, its threads laid out as s7's (s8) or by warp (s9, s10), its blocks walking C
// row by row (s8, s9) or in groups of tile rows (s10).
enum class DoubleBufferStep { double_buffer, warp_tiles, grouped_tiles };
void sgemm_double_buffer(const GemmArgs& args, DoubleBufferStep step, gpu::Stream stream);

}  // namespace crema::kernels::cuda::detail
