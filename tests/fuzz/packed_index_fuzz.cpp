// read_pack_index on any bytes: a PackedIndex or a crema::Error. The counts in its header (shards,
// classes, samples) multiply into the sizes to allocate, and every record's offset and length
// must lie inside its shard; the trailing CRC-32 is checked last, so mutations reach every check.
#include <filesystem>

#include "core/error.h"
#include "data/packed_index.h"
#include "tests/fuzz/fuzz_input.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const std::string dir = [] {
    const std::filesystem::path folder = crema::fuzz::input_dir() / "packed";
    std::filesystem::create_directories(folder);
    return folder.string();
  }();
  crema::fuzz::write_input(data, size, std::string("packed/") + crema::data::kPackIndexName);
  try {
    crema::data::read_pack_index(dir);
  } catch (const crema::Error&) {
  }
  return 0;
}
