// Tensors to and from files in the safetensors format (https://huggingface.co/docs/safetensors),
// and the durable, atomic file writes every checkpoint is made of.
//
// safetensors: an 8-byte little-endian header length L, L bytes of JSON
//   {"conv1.weight": {"dtype": "F32", "shape": [20, 1, 5, 5], "data_offsets": [0, 2000]}, ...,
//    "__metadata__": {"key": "value"}}   (optional, string values)
// padded with spaces to a multiple of 8, then the raw little-endian data; data_offsets count
// from the first byte after the header. PyTorch (safetensors.torch), JAX and others read it, so
// crema checkpoints are portable.
//
// Atomic writes: the bytes go to "<path>.tmp" in the same directory, which is fsync'ed, renamed
// over `path` (rename is atomic within a file system), and the directory is fsync'ed so that
// the rename itself survives a power loss. A crash at any moment leaves either the old file or
// the new one, whole -- never a truncated mix.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "core/float16.h"
#include "core/tensor.h"

namespace crema {

// Writes host tensors (F32, F64, BF16 or F16, each in its own dtype) atomically, in the given
// order. Throws crema::Error when the file cannot be written (the old file, if any, is then
// untouched).
void save_safetensors(const std::string& path,
                      const std::vector<std::pair<std::string, Tensor>>& tensors);

// What load_safetensors makes of F16 and BF16 tensors: f32 tensors for a net whose parameters
// are f32 (widen, exact), or f16 and bf16 tensors with the file's bits (keep).
enum class HalfTensors { widen, keep };

// Reads every tensor onto the host, in file order. F32 and F64 tensors keep their dtype; I64
// tensors (PyTorch's integer buffers such as bn1.num_batches_tracked) become F32; F16 and BF16
// become F32 (`half` widen, the default; `widened`, when given, counts them) or stay F16 and BF16
// (`half` keep: a save and load round trip is bit-exact). Any other dtype,
// a truncated file, a header that is not JSON or is longer than the file, offsets that disagree
// with a tensor's shape or overlap: crema::Error naming the file, the tensor and what is wrong.
std::vector<std::pair<std::string, Tensor>> load_safetensors(const std::string& path,
                                                             Widened* widened = nullptr,
                                                             HalfTensors half = HalfTensors::widen);

// Replaces `path` with `contents` atomically and durably (see above).
void write_file_atomic(const std::string& path, const std::string& contents);

// fsync of a directory: makes the creations, renames and removals inside it durable.
void sync_directory(const std::string& dir);

}  // namespace crema
