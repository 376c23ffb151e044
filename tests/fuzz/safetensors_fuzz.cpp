// load_safetensors on any bytes: a tensor list or a crema::Error, nothing else. The header length
// and every data_offsets pair come from the file, so this is where a wrong bound would read or
// allocate out of range.
#include "core/error.h"
#include "core/serialization.h"
#include "tests/fuzz/fuzz_input.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string path = crema::fuzz::write_input(data, size, "model.safetensors");
  try {
    crema::load_safetensors(path);
  } catch (const crema::Error&) {
  }
  return 0;
}
