// The image codec on top of stb_image and stb_image_write (Debian's libstb-dev headers). Their
// implementations are compiled here, once for the whole library.
#include "data/image.h"

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <memory>
#include <system_error>

#include "core/error.h"

#define STB_IMAGE_IMPLEMENTATION
#define STBI_FAILURE_USERMSG
#include <stb/stb_image.h>
#define STB_IMAGE_WRITE_IMPLEMENTATION
#include <stb/stb_image_write.h>

namespace crema::data {
namespace {

void check_channels(int channels, const std::string& name) {
  if (channels != 1 && channels != 3) {
    throw Error("image '" + name + "': channels is " + std::to_string(channels) +
                "; crema reads images as 1 (grayscale) or 3 (RGB) channels");
  }
}

// PNM (P5 gray, P6 RGB) is the uncompressed format whose header stb_image 2.27 does not hold
// against the data, and tests/fuzz/image_fuzz.cpp found two ways that goes wrong: "P5 3 33333333"
// (13 bytes) decodes into 100 MB of zeros, and a 16-bit PNM (maxval above 255) converted to
// other channels goes through stb's 8-bit routine, which then reads twice the bytes it wrote (a
// heap overflow). Both are refused before stb decodes; a 16-bit PNM in the channels it has
// decodes correctly. Uncompressed, the pixels need width * height * channels * (1 or 2) bytes.
void check_pnm(const uint8_t* bytes, int size, int channels, const std::string& name) {
  if (size < 2 || bytes[0] != 'P' || (bytes[1] != '5' && bytes[1] != '6')) return;
  int width = 0, height = 0, in_file = 0;
  if (!stbi_info_from_memory(bytes, size, &width, &height, &in_file)) return;  // stb refuses it
  const bool wide = stbi_is_16_bit_from_memory(bytes, size);
  const uint64_t needed =
      uint64_t(uint32_t(width)) * uint32_t(height) * uint32_t(in_file) * (wide ? 2 : 1);
  if (needed > uint64_t(size)) {
    throw Error("image '" + name + "' is truncated: its PNM header says " + std::to_string(width) +
                " x " + std::to_string(height) + " x " + std::to_string(in_file) +
                (wide ? " 16-bit" : "") + " samples, " + std::to_string(needed) +
                " bytes, but the file has " + std::to_string(size));
  }
  if (wide && in_file != channels) {
    throw Error("image '" + name + "' is a 16-bit PNM read as " + std::to_string(channels) +
                " channel(s), which stb_image cannot convert; convert the file to 8 bits or read "
                "it with the channels it has");
  }
}

std::string errno_text() {
  return std::generic_category().message(errno);
}

struct FileCloser {
  void operator()(std::FILE* file) const { std::fclose(file); }
};
using File = std::unique_ptr<std::FILE, FileCloser>;

File open_file(const std::string& path, const char* mode, const char* what) {
  errno = 0;
  File file(std::fopen(path.c_str(), mode));
  if (!file) throw Error("cannot " + std::string(what) + " image '" + path + "': " + errno_text());
  return file;
}

std::vector<uint8_t> read_bytes(const std::string& path) {
  File file = open_file(path, "rb", "open");
  std::vector<uint8_t> bytes;
  uint8_t chunk[1 << 16];
  while (true) {
    const size_t got = std::fread(chunk, 1, sizeof(chunk), file.get());
    bytes.insert(bytes.end(), chunk, chunk + got);
    if (got < sizeof(chunk)) break;
  }
  if (std::ferror(file.get())) throw Error("cannot read image '" + path + "': " + errno_text());
  return bytes;
}

// stb_image_write hands its output to a callback; this one appends to a byte vector.
void append_bytes(void* context, void* data, int size) {
  auto* bytes = static_cast<std::vector<uint8_t>*>(context);
  const auto* begin = static_cast<const uint8_t*>(data);
  bytes->insert(bytes->end(), begin, begin + size);
}

}  // namespace

void Image::reset(Shape new_shape) {
  shape = std::move(new_shape);
  pixels.resize(size_t(shape_numel(shape)));
}

void decode_image(const uint8_t* bytes, size_t size, int channels, const std::string& name,
                  Image& out) {
  check_channels(channels, name);
  if (size > size_t(INT32_MAX)) throw Error("image '" + name + "' is larger than 2 GiB");
  check_pnm(bytes, int(size), channels, name);
  int width = 0, height = 0, in_file = 0;
  std::unique_ptr<stbi_uc, void (*)(void*)> decoded(
      stbi_load_from_memory(bytes, int(size), &width, &height, &in_file, channels),
      stbi_image_free);
  if (!decoded) {
    throw Error("cannot decode image '" + name + "' (" + std::to_string(size) +
                " bytes): " + stbi_failure_reason() + "; is it a complete JPEG, PNG or BMP file?");
  }
  // [H, W, C] interleaved bytes -> [C, H, W] planar floats.
  out.reset({channels, height, width});
  const int64_t plane = int64_t(height) * width;
  const stbi_uc* src = decoded.get();
  for (int c = 0; c < channels; ++c) {
    float* dst = out.pixels.data() + c * plane;
    for (int64_t i = 0; i < plane; ++i) dst[i] = float(src[i * channels + c]);
  }
}

void read_image_file(const std::string& path, int channels, Image& out) {
  const std::vector<uint8_t> bytes = read_bytes(path);
  decode_image(bytes.data(), bytes.size(), channels, path, out);
}

Shape image_file_shape(const std::string& path, int channels) {
  check_channels(channels, path);
  File file = open_file(path, "rb", "open");
  int width = 0, height = 0, in_file = 0;
  if (!stbi_info_from_file(file.get(), &width, &height, &in_file)) {
    throw Error("cannot read the header of image '" + path + "': " + stbi_failure_reason() +
                "; is it a JPEG, PNG or BMP file?");
  }
  return {channels, height, width};
}

ImageFormat parse_image_format(const std::string& name) {
  if (name == "png") return ImageFormat::png;
  if (name == "jpg" || name == "jpeg") return ImageFormat::jpeg;
  throw Error("unknown image format '" + name + "' (known: png, jpg)");
}

const char* image_extension(ImageFormat format) {
  return format == ImageFormat::png ? ".png" : ".jpg";
}

void write_image_file(const std::string& path, const Image& image, ImageFormat format,
                      int quality) {
  if (image.shape.size() != 3) {
    throw Error("cannot write image '" + path + "': shape " + shape_str(image.shape) +
                " is not C x H x W");
  }
  const int channels = int(image.channels()), height = int(image.height()),
            width = int(image.width());
  check_channels(channels, path);
  // [C, H, W] planar floats -> [H, W, C] interleaved bytes.
  const int64_t plane = int64_t(height) * width;
  std::vector<uint8_t> interleaved(size_t(plane * channels));
  for (int c = 0; c < channels; ++c) {
    const float* src = image.pixels.data() + c * plane;
    for (int64_t i = 0; i < plane; ++i) {
      interleaved[size_t(i * channels + c)] =
          uint8_t(std::clamp(std::nearbyint(src[i]), 0.0f, 255.0f));
    }
  }
  std::vector<uint8_t> encoded;
  const int ok = format == ImageFormat::png
                     ? stbi_write_png_to_func(append_bytes, &encoded, width, height, channels,
                                              interleaved.data(), width * channels)
                     : stbi_write_jpg_to_func(append_bytes, &encoded, width, height, channels,
                                              interleaved.data(), std::clamp(quality, 1, 100));
  if (!ok) throw Error("cannot encode image '" + path + "' (" + shape_str(image.shape) + ")");
  File file = open_file(path, "wb", "create");
  if (std::fwrite(encoded.data(), 1, encoded.size(), file.get()) != encoded.size() ||
      std::fflush(file.get()) != 0) {
    throw Error("cannot write image '" + path + "': " + errno_text());
  }
}

}  // namespace crema::data
