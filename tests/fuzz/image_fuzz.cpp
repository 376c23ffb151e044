// The image decoders as the loaders call them: the header alone (image_file_shape, which sizes an
// image folder), then the full decode to grayscale and to RGB (read_image_file), and for a JPEG
// the reduced decode of a window that a first random_resized_crop asks for (1/2, 1/4 or 1/8 and
// the window from the input's size). libjpeg-turbo (a Debian binary, not instrumented) takes the
// JPEGs, stb_image the rest. Either an Image or crema::Error. The pixel limit is 2^22 rather than
// the default 178 M: a legitimate 178 M-pixel image would take more than the fuzzer's 2 GB and 10 s
// per input, and the limit is the same code whatever its value.
#include "core/error.h"
#include "data/image.h"
#include "tests/fuzz/fuzz_input.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string path = crema::fuzz::write_input(data, size, "image");
  crema::data::DecodeOptions options;
  options.max_pixels = int64_t(1) << 22;
  for (int channels : {1, 3}) {
    try {
      crema::data::image_file_shape(path, channels, options.max_pixels);
      crema::data::Image image;
      crema::data::read_image_file(path, channels, image, options);
    } catch (const crema::Error&) {
    }
  }
  // A random_resized_crop's plan: a reduction and a window of the reduced image, from the size.
  options.plan = [size](crema::data::Size2 full) {
    crema::data::DecodePlan plan;
    plan.reduction = 2 << (size % 3);
    const int64_t r = plan.reduction;
    const int64_t height = (full.height + r - 1) / r, width = (full.width + r - 1) / r;
    plan.top = int64_t(size / 3) % height;
    plan.left = int64_t(size / 7) % width;
    plan.height = 1 + int64_t(size / 11) % (height - plan.top);
    plan.width = 1 + int64_t(size / 13) % (width - plan.left);
    return plan;
  };
  try {
    crema::data::Image image;
    crema::data::read_image_file(path, 3, image, options);
  } catch (const crema::Error&) {
  }
  return 0;
}
