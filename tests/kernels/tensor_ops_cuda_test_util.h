// What the CUDA tests of the tensor ops share: every version of each CUDA path, and the device
// workspace a reduction asks for.
#pragma once

#include "core/context.h"
#include "core/tensor.h"
#include "kernels/tensor_ops/tensor_ops.h"

namespace crema::kernels::testing {

inline const cuda::OpTensorVersion kOpTensorVersions[] = {cuda::OpTensorVersion::elementwise,
                                                          cuda::OpTensorVersion::row_vectors};
inline const cuda::ReduceTensorVersion kReduceTensorVersions[] = {
    cuda::ReduceTensorVersion::block_per_output, cuda::ReduceTensorVersion::split};
inline const cuda::TransformVersion kTransformVersions[] = {cuda::TransformVersion::index_map,
                                                            cuda::TransformVersion::tiled};

// A device buffer of at least the workspace `plan` needs (one float when it needs none).
inline Tensor reduce_workspace(Context& ctx, const ReducePlan& plan,
                               cuda::ReduceTensorVersion version) {
  const size_t bytes = cuda::reduce_tensor_workspace_bytes(plan, version);
  return ctx.empty({int64_t(bytes / sizeof(float)) + 1});
}

}  // namespace crema::kernels::testing
