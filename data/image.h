// Image: one decoded sample as the loader's transforms see it, and the codec that turns image
// files into Images and back: libjpeg-turbo reads and writes JPEG (data/jpeg.h), stb_image reads
// PNG, BMP, GIF, TGA, PSD, PNM and HDR, stb_image_write writes PNG. The format is sniffed from the
// file's first bytes, never taken from its name (a PNG named .jpg decodes as the PNG it is).
//
// An Image is planar float, C x H x W: pixels[c * H * W + h * W + w], in the file's units (0..255
// for 8-bit images) until a transform such as `scale` changes them. Files store pixels
// interleaved (H x W x C, uint8); decoding converts, and encoding converts back (rounded, clamped
// to 0..255).
//
// Decoding is thread-safe (stb_image keeps its failure reason per thread, libjpeg its state per
// call), so loader workers decode in parallel. Every error names the file.
//
// Limits, checked on the header before a pixel is decoded (files are untrusted):
//   - every image: width x height <= DecodeOptions::max_pixels (PIL's default, 178,956,970);
//   - the uncompressed formats (BMP, PNM, TGA types 1-3): the pixels the header promises must be
//     in the file, width x height x bytes per pixel <= its size (stb_image would otherwise turn
//     a 36-byte TGA header into 178 M zero pixels); no image of 0 width or height; every PNG
//     chunk within the file;
//   - JPEG: a truncated file and more than kMaxJpegScans progressive scans are errors (jpeg.h).
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "core/shape.h"

namespace crema::data {

struct Size2 {
  int64_t height = 0, width = 0;
};

struct Image {
  Shape shape;                // {C, H, W}, or a dataset's own sample shape (IDX: {1, 28, 28})
  std::vector<float> pixels;  // [shape...] row-major
  // A JPEG decoded for the first transform's DecodePlan may be only part of the file: the rows
  // [top, top + H) and columns [left, left + W) of the file decoded at 1/reduction (2, 4 or 8
  // shrink the file's `full` size to ceil(full / reduction) per side). The transform that asked
  // draws its geometry on `full` and maps it onto these pixels (data/transform.h). Otherwise
  // (the whole file at full size) reduction 1, top = left = 0 and `full` is {0, 0}.
  int reduction = 1;
  int64_t top = 0, left = 0;
  Size2 full;

  int64_t channels() const { return shape.at(0); }
  int64_t height() const { return shape.at(1); }
  int64_t width() const { return shape.at(2); }
  // Whether this is part of a file (reduced, or a window of it): `full` is then set.
  bool is_part() const { return full.height > 0; }
  // The file's height x width: `full` for a part, else the shape's.
  Size2 full_size() const { return is_part() ? full : Size2{height(), width()}; }
  // Sets the shape, sizes `pixels` to match (keeping the capacity for the next sample) and
  // makes it a whole image (reduction 1, top = left = 0, no `full`).
  void reset(Shape new_shape);
};

inline constexpr int64_t kDefaultMaxImagePixels = 178956970;  // PIL's Image.MAX_IMAGE_PIXELS

// What the first transform needs of a JPEG, asked with the file's size before it decodes
// (Transform::decode_plan): decode at 1/reduction (1, 2, 4 or 8), and of that reduced image only
// the window of rows [top, top + height) and columns [left, left + width); height = 0 means all
// of it. The window must lie inside the reduced image.
struct DecodePlan {
  int reduction = 1;
  int64_t top = 0, left = 0, height = 0, width = 0;
};
using DecodePlanner = std::function<DecodePlan(Size2 full)>;

struct DecodeOptions {
  // Larger images (width x height) are refused as decompression bombs.
  int64_t max_pixels = kDefaultMaxImagePixels;
  // Asked with a JPEG's full size before it decodes (data/jpeg.h). Empty: the whole file at full
  // size. Other formats decode whole at full size whatever it says.
  DecodePlanner plan;
};

// Throws crema::Error naming `name` when width x height is above `max_pixels`.
void check_image_pixels(int64_t width, int64_t height, int64_t max_pixels, const std::string& name);

// Decodes `size` bytes of an encoded image into `out` with `channels` channels (1: grayscale,
// 3: RGB; stb_image converts RGB to gray as (77 R + 150 G + 29 B) / 256, libjpeg as jpeg.h says;
// gray to RGB by copying, alpha dropped). Throws crema::Error naming `name` when the bytes are
// not a readable image or break a limit above.
void decode_image(const uint8_t* bytes, size_t size, int channels, const std::string& name,
                  Image& out, const DecodeOptions& options = {});
// Reads and decodes the file at `path`; errors name the path (missing, unreadable, corrupt).
void read_image_file(const std::string& path, int channels, Image& out,
                     const DecodeOptions& options = {});
// The bytes of the file at `path`; errors name it.
std::vector<uint8_t> read_image_bytes(const std::string& path);
// The {channels, H, W} of an image file from its header alone (no pixel is decoded); a header
// above `max_pixels` is an error.
Shape image_file_shape(const std::string& path, int channels,
                       int64_t max_pixels = kDefaultMaxImagePixels);

// The encoded formats crema writes.
enum class ImageFormat { png, jpeg };
// "png" or "jpg"/"jpeg"; throws crema::Error listing the known names otherwise.
ImageFormat parse_image_format(const std::string& name);
// The file extension of `format`, with its dot: ".png", ".jpg".
const char* image_extension(ImageFormat format);

// Encodes `image` (1 or 3 channels, values rounded and clamped to 0..255) and writes it to
// `path`: PNG by stb_image_write (lossless), JPEG by libjpeg-turbo at `quality` (1..100). Throws
// crema::Error naming the path.
void write_image_file(const std::string& path, const Image& image, ImageFormat format,
                      int quality = 95);

}  // namespace crema::data
