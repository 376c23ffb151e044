// The file behind --weights, recognised by its content rather than its name:
//
//   8-byte length, then "{"     safetensors (core/serialization.h)
//   "PK\x03\x04" ...            a PyTorch checkpoint (torch.save, torch >= 1.6: a zip; core/pth.h)
//   0x80 0x02 ... (a pickle)    torch < 1.6's legacy format (or a bare pickle.dump): refused, with
//                               how to re-save it
//   a directory                 refused, naming the file inside a run to pass instead
//
// Anything else is refused with what its first bytes look like and what crema reads.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "core/tensor.h"

namespace crema {

struct WeightsFile {
  std::vector<std::pair<std::string, Tensor>> tensors;  // on the host, f32 (f64 kept), file order
  // What reading it did beyond copying, for the log: "converted 12 bf16 tensors to f32; the
  // state_dict under 'model'; 'module.' prefixes removed", or "".
  std::string notes;
};

// Throws crema::Error naming the file and, for a file that is not weights, what to pass instead.
WeightsFile read_weights_file(const std::string& path);

}  // namespace crema
