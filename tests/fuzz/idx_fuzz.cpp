// read_idx on any bytes (plain or gzip: zlib's gzread takes both): an IdxArray or a crema::Error.
// The extents in the header multiply into the size to allocate.
#include "core/error.h"
#include "data/idx.h"
#include "tests/fuzz/fuzz_input.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string path = crema::fuzz::write_input(data, size, "images.idx");
  try {
    crema::data::read_idx(path);
  } catch (const crema::Error&) {
  }
  return 0;
}
