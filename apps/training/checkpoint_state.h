// state.json, the part of a checkpoint that is not tensors (apps/training/checkpoint.h:
// TrainingState).
#pragma once

#include <string>

#include "apps/training/checkpoint.h"

namespace crema {

// The JSON text crema writes as a checkpoint's state.json.
std::string state_json_text(const TrainingState& state);
// Reads `path` back. Throws crema::Error naming the file (and the field: "'iteration' is
// 5.11111e+22, not an integer >= 0") for anything that is not a complete state of this format.
TrainingState read_state_json(const std::string& path);

}  // namespace crema
