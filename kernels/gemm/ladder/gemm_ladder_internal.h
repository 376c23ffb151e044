// Launchers of the ladder's rungs that live in their own files, called by ladder::sgemm
// (gemm_ladder_cuda.cu). Arguments as production's launchers take them (gemm_cuda_internal.h:
// checked, M, N, K >= 1, alpha != 0).
#pragma once

#include "core/cuda_runtime.h"
#include "kernels/gemm/gemm_cuda_internal.h"

namespace crema::kernels::cuda::detail {

// s4 column_tiles, s5 micro_tiles, s6 vector_fragments, s7 vector_loads
// (gemm_register_tiles_cuda.cu).
void sgemm_column_tiles(const GemmArgs& args, gpu::Stream stream);
void sgemm_micro_tiles(const GemmArgs& args, gpu::Stream stream);
void sgemm_vector_fragments(const GemmArgs& args, gpu::Stream stream);
void sgemm_vector_loads(const GemmArgs& args, gpu::Stream stream);

// s9 double_buffer, s10 warp_tiles, s11 grouped_tiles, s12 fragment_prefetch, s13
// two_blocks_per_sm (gemm_double_buffer_cuda.cu): one loop with two shared slabs, its threads laid
// out as s8's (s9) or by warp (s10 on), its blocks walking C row by row (s9, s10) or in groups of
// tile rows (s11 on), its fragments read when used (s9-s11) or one k step ahead (s12, s13), one
// block per SM (s9-s12) or two (s13).
enum class DoubleBufferStep {
  double_buffer,
  warp_tiles,
  grouped_tiles,
  fragment_prefetch,
  two_blocks_per_sm
};
void sgemm_double_buffer(const GemmArgs& args, DoubleBufferStep step, gpu::Stream stream);

}  // namespace crema::kernels::cuda::detail
