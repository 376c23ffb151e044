// The image codec: JPEG by libjpeg-turbo (data/jpeg.cpp), the other formats by stb_image and
// stb_image_write (Debian's libstb-dev headers), whose implementations are compiled here, once
// for the whole library. The header checks use stb's own format tests, which this file can call
// because it holds stb's implementation.
#include "data/image.h"

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <system_error>

#include "core/error.h"
#include "data/jpeg.h"

#define STB_IMAGE_IMPLEMENTATION
#define STBI_FAILURE_USERMSG
// JPEG is libjpeg-turbo's alone: stb's decoder would take what libjpeg refuses (fill bytes
// before the SOI marker), and it writes past a Huffman table given one (the fuzzer's "FF FF D8").
#define STBI_NO_JPEG
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

enum class StbFormat { png, bmp, gif, psd, pic, pnm, hdr, tga, unknown };

// The format stb_image will decode `bytes` as: its own tests, in its own order (stbi__load_main),
// so the checks below see what stb will see. TGA has no magic and comes last.
StbFormat stb_format(const uint8_t* bytes, int size) {
  stbi__context s;
  stbi__start_mem(&s, bytes, size);
  if (stbi__png_test(&s)) return StbFormat::png;
  if (stbi__bmp_test(&s)) return StbFormat::bmp;
  if (stbi__gif_test(&s)) return StbFormat::gif;
  if (stbi__psd_test(&s)) return StbFormat::psd;
  if (stbi__pic_test(&s)) return StbFormat::pic;
  if (stbi__pnm_test(&s)) return StbFormat::pnm;
  if (stbi__hdr_test(&s)) return StbFormat::hdr;
  if (stbi__tga_test(&s)) return StbFormat::tga;
  return StbFormat::unknown;
}

uint32_t little_endian(const uint8_t* bytes, int size, int at, int count) {
  uint32_t value = 0;
  for (int i = count - 1; i >= 0; --i) value = (value << 8) | (at + i < size ? bytes[at + i] : 0);
  return value;
}

// The bytes of pixel data an uncompressed file's header promises (0 for compressed formats),
// without row padding: a lower bound. BMP: bits per pixel at offset 28 (24 in the 12-byte OS/2
// header; stb reads no RLE BMP); TGA: image types 1-3 are uncompressed (9-11 are RLE), bits per
// pixel (or per palette index) at offset 16; PNM: 1 or 2 bytes per sample.
uint64_t uncompressed_bytes(StbFormat format, const uint8_t* bytes, int size, uint64_t pixels,
                            int in_file) {
  if (format == StbFormat::bmp) {
    const uint32_t header = little_endian(bytes, size, 14, 4);
    const uint64_t bits = little_endian(bytes, size, header == 12 ? 24 : 28, 2);
    return (pixels * bits + 7) / 8;
  }
  if (format == StbFormat::tga && size > 16 && bytes[2] >= 1 && bytes[2] <= 3) {
    return pixels * ((bytes[16] + 7u) / 8u);
  }
  if (format == StbFormat::pnm) {
    return pixels * uint32_t(in_file) * (stbi_is_16_bit_from_memory(bytes, size) ? 2 : 1);
  }
  return 0;
}

// stb_image allocates a PNG chunk's declared length before reading it, so 118 bytes declaring a
// 1 GB IDAT chunk cost a gigabyte (tests/fuzz/image_fuzz.cpp: a timeout under ASan). Every chunk
// up to IEND must fit the file: 4 bytes of length, 4 of type, the data, 4 of CRC.
void check_png_chunks(const uint8_t* bytes, int size, const std::string& name) {
  for (uint64_t at = 8; at + 8 <= uint64_t(size);) {
    const uint64_t length = uint64_t(bytes[at]) << 24 | uint64_t(bytes[at + 1]) << 16 |
                            uint64_t(bytes[at + 2]) << 8 | bytes[at + 3];
    const std::string type(reinterpret_cast<const char*>(bytes + at + 4), 4);
    if (at + 12 + length > uint64_t(size)) {
      throw Error("image '" + name + "' is truncated: its PNG chunk '" + type + "' at byte " +
                  std::to_string(at) + " declares " + std::to_string(length) +
                  " bytes, but the file has " + std::to_string(size));
    }
    if (type == "IEND") return;
    at += 12 + length;
  }
}

// The limits of image.h on the header stb reads, before stb decodes anything. PNM adds its own
// case found by tests/fuzz/image_fuzz.cpp: a 16-bit PNM converted to other channels goes
// through stb 2.27's 8-bit routine, which reads twice the bytes it wrote (a heap overflow), so
// that conversion is refused; a 16-bit PNM in the channels it has decodes correctly.
void check_stb_header(const uint8_t* bytes, int size, int channels, int64_t max_pixels,
                      const std::string& name) {
  int width = 0, raw_height = 0, in_file = 0;
  if (!stbi_info_from_memory(bytes, size, &width, &raw_height, &in_file)) return;  // stb refuses
  // A top-down BMP's height is negative. An image of no pixels is refused: stb would still loop
  // over its rows (a BMP 0 pixels wide and 16 M rows high was a fuzzer's timeout).
  const int64_t height = std::abs(int64_t(raw_height));
  if (width <= 0 || height == 0) {
    throw Error("image '" + name + "' has no pixels: its header says " + std::to_string(width) +
                " x " + std::to_string(height));
  }
  check_image_pixels(width, height, max_pixels, name);
  const StbFormat format = stb_format(bytes, size);
  if (format == StbFormat::png) check_png_chunks(bytes, size, name);
  const uint64_t pixels = uint64_t(width) * uint64_t(height);
  const uint64_t needed = uncompressed_bytes(format, bytes, size, pixels, in_file);
  if (needed > uint64_t(size)) {
    const char* names[] = {"PNG", "BMP", "GIF", "PSD", "PIC", "PNM", "HDR", "TGA", ""};
    throw Error("image '" + name + "' is truncated: its " + names[int(format)] + " header says " +
                std::to_string(width) + " x " + std::to_string(height) + " uncompressed pixels, " +
                std::to_string(needed) + " bytes, but the file has " + std::to_string(size));
  }
  if (format == StbFormat::pnm && stbi_is_16_bit_from_memory(bytes, size) && in_file != channels) {
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

void check_image_pixels(int64_t width, int64_t height, int64_t max_pixels,
                        const std::string& name) {
  if (width * height > max_pixels) {
    throw Error("image '" + name + "' is " + std::to_string(width) + " x " +
                std::to_string(height) + " = " + std::to_string(width * height) +
                " pixels, above the limit of " + std::to_string(max_pixels) +
                " (max_image_pixels): a decompression bomb, or raise the limit");
  }
}

void Image::reset(Shape new_shape) {
  shape = std::move(new_shape);
  pixels.resize(size_t(shape_numel(shape)));
  reduction = 1;
  top = left = 0;
  full = {};
}

void decode_image(const uint8_t* bytes, size_t size, int channels, const std::string& name,
                  Image& out, const DecodeOptions& options) {
  check_channels(channels, name);
  if (is_jpeg(bytes, size)) {
    decode_jpeg(bytes, size, channels, name, options, out);
    return;
  }
  if (size > size_t(INT32_MAX)) throw Error("image '" + name + "' is larger than 2 GiB");
  check_stb_header(bytes, int(size), channels, options.max_pixels, name);
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

void read_image_file(const std::string& path, int channels, Image& out,
                     const DecodeOptions& options) {
  const std::vector<uint8_t> bytes = read_bytes(path);
  decode_image(bytes.data(), bytes.size(), channels, path, out, options);
}

std::vector<uint8_t> read_image_bytes(const std::string& path) {
  return read_bytes(path);
}

Shape image_file_shape(const std::string& path, int channels, int64_t max_pixels) {
  check_channels(channels, path);
  const std::vector<uint8_t> bytes = read_bytes(path);
  if (is_jpeg(bytes.data(), bytes.size())) {
    const Size2 size = jpeg_size(bytes.data(), bytes.size(), path);
    check_image_pixels(size.width, size.height, max_pixels, path);
    return {channels, size.height, size.width};
  }
  if (bytes.size() > size_t(INT32_MAX)) throw Error("image '" + path + "' is larger than 2 GiB");
  int width = 0, height = 0, in_file = 0;
  if (!stbi_info_from_memory(bytes.data(), int(bytes.size()), &width, &height, &in_file)) {
    throw Error("cannot read the header of image '" + path + "': " + stbi_failure_reason() +
                "; is it a JPEG, PNG or BMP file?");
  }
  check_stb_header(bytes.data(), int(bytes.size()), channels, max_pixels, path);
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
  if (format == ImageFormat::jpeg) {
    encoded =
        encode_jpeg(interleaved.data(), height, width, channels, std::clamp(quality, 1, 100), path);
  } else if (!stbi_write_png_to_func(append_bytes, &encoded, width, height, channels,
                                     interleaved.data(), width * channels)) {
    throw Error("cannot encode image '" + path + "' (" + shape_str(image.shape) + ")");
  }
  File file = open_file(path, "wb", "create");
  if (std::fwrite(encoded.data(), 1, encoded.size(), file.get()) != encoded.size() ||
      std::fflush(file.get()) != 0) {
    throw Error("cannot write image '" + path + "': " + errno_text());
  }
}

}  // namespace crema::data
