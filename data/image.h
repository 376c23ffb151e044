// Image: one decoded sample as the loader's transforms see it, and the codec that turns image
// files into Images and back (stb_image reads JPEG, PNG, BMP, GIF, TGA, PSD, PNM and HDR;
// stb_image_write writes PNG and JPEG).
//
// An Image is planar float, C x H x W: pixels[c * H * W + h * W + w], in the file's units (0..255
// for 8-bit images) until a transform such as `scale` changes them. Files store pixels
// interleaved (H x W x C, uint8); decoding converts, and encoding converts back (rounded, clamped
// to 0..255).
//
// Decoding is thread-safe (stb_image keeps its failure reason per thread), so loader workers
// decode in parallel. Every error names the file.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/shape.h"

namespace crema::data {

struct Image {
  Shape shape;                // {C, H, W}, or a dataset's own sample shape (IDX: {1, 28, 28})
  std::vector<float> pixels;  // [shape...] row-major

  int64_t channels() const { return shape.at(0); }
  int64_t height() const { return shape.at(1); }
  int64_t width() const { return shape.at(2); }
  // Sets the shape and sizes `pixels` to match, keeping the capacity for the next sample.
  void reset(Shape new_shape);
};

// Decodes `size` bytes of an encoded image into `out` with `channels` channels (1: grayscale,
// 3: RGB; stb_image converts: RGB to gray as (77 R + 150 G + 29 B) / 256, gray to RGB by copying,
// alpha dropped). Throws crema::Error naming `name` when the bytes are not a readable image.
void decode_image(const uint8_t* bytes, size_t size, int channels, const std::string& name,
                  Image& out);
// Reads and decodes the file at `path`; errors name the path (missing, unreadable, corrupt).
void read_image_file(const std::string& path, int channels, Image& out);
// The {channels, H, W} of an image file from its header alone (no pixel is decoded).
Shape image_file_shape(const std::string& path, int channels);

// The encoded formats crema writes.
enum class ImageFormat { png, jpeg };
// "png" or "jpg"/"jpeg"; throws crema::Error listing the known names otherwise.
ImageFormat parse_image_format(const std::string& name);
// The file extension of `format`, with its dot: ".png", ".jpg".
const char* image_extension(ImageFormat format);

// Encodes `image` (1 or 3 channels, values rounded and clamped to 0..255) and writes it to
// `path`. `quality` (1..100) is JPEG's; PNG is lossless. Throws crema::Error naming the path.
void write_image_file(const std::string& path, const Image& image, ImageFormat format,
                      int quality = 95);

}  // namespace crema::data
