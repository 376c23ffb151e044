// A checkpoint directory whose state.json is the fuzzer's bytes, read as `crema train --resume`
// reads it (read_checkpoint): the state is parsed and checked first, so a state that passes goes
// on to the missing model.safetensors and is refused there. Either way: crema::Error only.
#include "apps/training/checkpoint.h"
#include "core/error.h"
#include "tests/fuzz/fuzz_input.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  crema::fuzz::write_input(data, size, "state.json");
  try {
    crema::read_checkpoint(crema::fuzz::input_dir().string());
  } catch (const crema::Error&) {
  }
  return 0;
}
