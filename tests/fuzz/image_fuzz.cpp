// The image decoders as the loaders call them: the header alone (image_file_shape, which sizes an
// image folder), then the full decode to grayscale and to RGB (read_image_file). Either an Image
// or crema::Error.
#include "core/error.h"
#include "data/image.h"
#include "tests/fuzz/fuzz_input.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string path = crema::fuzz::write_input(data, size, "image");
  for (int channels : {1, 3}) {
    try {
      crema::data::image_file_shape(path, channels);
      crema::data::Image image;
      crema::data::read_image_file(path, channels, image);
    } catch (const crema::Error&) {
    }
  }
  return 0;
}
