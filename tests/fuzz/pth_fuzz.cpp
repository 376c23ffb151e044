// load_pth on any bytes: a tensor list or a crema::Error, nothing else. Every size here comes from
// the file -- the zip's entries (libzip), the pickle's lengths, memo indices and stack, each
// storage's element count, each tensor's offset, sizes and strides -- so this is where a wrong
// bound would read or allocate out of range, and where a pickle could try to name a global.
#include "core/error.h"
#include "core/pth.h"
#include "tests/fuzz/fuzz_input.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string path = crema::fuzz::write_input(data, size, "model.pth");
  try {
    crema::load_pth(path);
  } catch (const crema::Error&) {
  }
  return 0;
}
