// Tensors to and from files in the safetensors format (https://huggingface.co/docs/safetensors):
// an 8-byte little-endian header length, a JSON header {name: {dtype, shape, data_offsets}}, then
// the raw little-endian data. PyTorch, JAX and others read it, so crema checkpoints are portable.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "core/tensor.h"

namespace crema {

// Writes to a temporary file in the same directory and renames it over `path`, so a crash
// mid-write never leaves a truncated checkpoint where a good one was.
void save_safetensors(const std::string& path,
                      const std::vector<std::pair<std::string, Tensor>>& tensors);
// Reads every tensor (F32 or F64) onto the host. Errors name the file and what is wrong.
std::vector<std::pair<std::string, Tensor>> load_safetensors(const std::string& path);

}  // namespace crema
