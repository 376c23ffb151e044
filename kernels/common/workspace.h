// Scratch memory for a CUDA implementation, from the context's one workspace (Darknet's idea: one
// buffer sized by the largest request, reused by every layer; see core/context.h).
#pragma once

#include <cstddef>

#include "core/context.h"

namespace crema::kernels {

// `bytes` of the context's workspace (rounded up to whole floats), or null when none is needed:
// what a kernel's `..._workspace_bytes` asked for.
inline void* workspace_for(Context& ctx, size_t bytes) {
  return bytes > 0 ? ctx.workspace((bytes + sizeof(float) - 1) / sizeof(float)) : nullptr;
}

}  // namespace crema::kernels
