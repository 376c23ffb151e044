// load_cifar on any bytes, read as each of the three variants: a Dataset whose samples and labels
// can all be read, or a crema::Error.
#include "core/error.h"
#include "data/cifar.h"
#include "tests/fuzz/fuzz_input.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using crema::data::CifarVariant;
  const std::string path = crema::fuzz::write_input(data, size, "data_batch_1.bin");
  for (CifarVariant variant :
       {CifarVariant::cifar10, CifarVariant::cifar100_fine, CifarVariant::cifar100_coarse}) {
    try {
      const auto set = crema::data::load_cifar({path}, variant);
      crema::data::Image image;
      for (int64_t i = 0; i < set->size(); ++i) {
        set->read_sample(i, image);
        set->label(i);
      }
    } catch (const crema::Error&) {
    }
  }
  return 0;
}
