// The block layout of the multi-tensor kernels (the optimizer update, its clipping norm and the
// gradient unscale in kernels/optimizers/; the flat pack and unpack in kernels/cast/): one launch
// covers up to 32 tensors ("slices"; 64 for the flat pack), passed by value in the kernel's
// parameters, and slice k owns blocks [first_block[k], first_block[k + 1]). Each block finds its
// slice by a scan of those ranges (one comparison per slice, from parameter memory). Included by
// .cu files only.
#pragma once

namespace crema::kernels::cuda {

__device__ inline int slice_of_block(const int* first_block, int count) {
  int k = 0;
  while (k + 1 < count && int(blockIdx.x) >= first_block[k + 1]) ++k;
  return k;
}

}  // namespace crema::kernels::cuda
