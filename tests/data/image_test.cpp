// The image codec (stb_image / stb_image_write; JPEG: jpeg_test.cpp) and the geometry of
// data/image_ops.h.
#include "data/image.h"

#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "data/image_ops.h"
#include "tests/data/data_test_util.h"

namespace crema::data {
namespace {

using testing::DataFiles;
using testing::error_of;
using testing::pattern_image;

Image from_rows(const Shape& shape, const std::vector<float>& pixels) {
  Image image;
  image.shape = shape;
  image.pixels = pixels;
  return image;
}

class ImageCodec : public DataFiles {
 protected:
  // `image` written as the PNG file `name` and read back with `channels` channels.
  Image png_read_back(const Image& image, const std::string& name, int channels) const {
    write_image_file(path(name), image, ImageFormat::png);
    Image back;
    read_image_file(path(name), channels, back);
    return back;
  }
};

TEST_F(ImageCodec, PngRoundTripIsExactForGrayAndRgb) {
  for (const Image& image : {pattern_image(1, 5, 7, 1), pattern_image(3, 4, 6, 2)}) {
    const std::string file = path("x" + std::to_string(image.channels()) + ".png");
    write_image_file(file, image, ImageFormat::png);
    EXPECT_EQ(image_file_shape(file, int(image.channels())), image.shape);
    Image back;
    back.pixels.assign(3, std::nanf(""));
    read_image_file(file, int(image.channels()), back);
    EXPECT_EQ(back.shape, image.shape);
    EXPECT_EQ(back.pixels, image.pixels);
  }
}

TEST_F(ImageCodec, JpegRoundTripIsClose) {
  // A smooth image: JPEG keeps it within a few levels at quality 95.
  Image image;
  image.reset({3, 16, 24});
  for (int64_t c = 0; c < 3; ++c) {
    for (int64_t h = 0; h < 16; ++h) {
      for (int64_t w = 0; w < 24; ++w) {
        image.pixels[size_t((c * 16 + h) * 24 + w)] = float(40 + 60 * c + 5 * h + 3 * w);
      }
    }
  }
  const std::string file = path("smooth.jpg");
  write_image_file(file, image, ImageFormat::jpeg, 95);
  Image back;
  read_image_file(file, 3, back);
  ASSERT_EQ(back.shape, image.shape);
  double total = 0;
  for (size_t i = 0; i < image.pixels.size(); ++i)
    total += std::fabs(back.pixels[i] - image.pixels[i]);
  EXPECT_LT(total / double(image.pixels.size()), 3.0);
}

TEST_F(ImageCodec, ConvertsBetweenGrayAndRgb) {
  const Image rgb = pattern_image(3, 3, 5, 3);
  const Image gray = png_read_back(rgb, "rgb.png", 1);
  ASSERT_EQ(gray.shape, (Shape{1, 3, 5}));
  for (size_t i = 0; i < 15; ++i) {
    // stb_image's luma: (77 R + 150 G + 29 B) >> 8.
    const int r = int(rgb.pixels[i]), g = int(rgb.pixels[15 + i]), b = int(rgb.pixels[30 + i]);
    EXPECT_EQ(gray.pixels[i], float((77 * r + 150 * g + 29 * b) >> 8)) << i;
  }
  const Image one = pattern_image(1, 2, 3, 4);
  const Image three = png_read_back(one, "gray.png", 3);
  ASSERT_EQ(three.shape, (Shape{3, 2, 3}));
  for (size_t c = 0; c < 3; ++c) {
    for (size_t i = 0; i < 6; ++i) EXPECT_EQ(three.pixels[c * 6 + i], one.pixels[i]);
  }
}

TEST_F(ImageCodec, BadFilesAreErrorsNamingTheFile) {
  Image out;
  const std::string missing = path("absent.png");
  EXPECT_CONTAINS(error_of([&] { read_image_file(missing, 1, out); }), missing);
  EXPECT_CONTAINS(error_of([&] { image_file_shape(missing, 1); }), missing);

  const std::string text = write_file("notes.png", "these are not pixels\n");
  EXPECT_CONTAINS(error_of([&] { read_image_file(text, 1, out); }), text);
  EXPECT_CONTAINS(error_of([&] { image_file_shape(text, 1); }), text);

  write_image_file(path("whole.png"), pattern_image(1, 20, 20), ImageFormat::png);
  const std::string bytes = testing::read_file(path("whole.png"));
  const std::string cut = write_file("cut.png", bytes.substr(0, bytes.size() / 2));
  const std::string message = error_of([&] { read_image_file(cut, 1, out); });
  EXPECT_CONTAINS(message, cut);
  EXPECT_CONTAINS(message, "is truncated: its PNG chunk 'IDAT'");
  // Cut between chunks, the file is whole as far as it goes: stb finds no image data.
  const std::string headers = write_file("headers.png", bytes.substr(0, bytes.find("IDAT") - 4));
  EXPECT_CONTAINS(error_of([&] { read_image_file(headers, 1, out); }), "cannot decode");

  const std::string empty = write_file("empty.jpg", "");
  EXPECT_CONTAINS(error_of([&] { read_image_file(empty, 3, out); }), empty);
  EXPECT_CONTAINS(error_of([&] { read_image_file(path("whole.png"), 2, out); }), "channels is 2");
}

// stb_image 2.27 overflows its buffer converting a 16-bit PNM's channels (found by
// tests/fuzz/image_fuzz.cpp): the conversion is refused, the file's own channels still decode.
TEST_F(ImageCodec, SixteenBitPnmDecodesOnlyInItsOwnChannels) {
  Image out;
  // P6, 2 x 1 pixels, maxval 1000: big-endian 16-bit samples (1000, 500, 0), (250, 750, 1000).
  const std::string rgb =
      write_file("rgb16.ppm", std::string("P6 2 1 1000\n\x03\xe8\x01\xf4\x00\x00\x00\xfa"
                                          "\x02\xee\x03\xe8",
                                          24));
  EXPECT_CONTAINS(error_of([&] { read_image_file(rgb, 1, out); }), "16-bit PNM");
  read_image_file(rgb, 3, out);
  EXPECT_EQ(out.shape, (Shape{3, 1, 2}));
  const std::string gray = write_file("gray16.pgm", std::string("P5 1 1 1000\n\x03\xe8", 14));
  EXPECT_CONTAINS(error_of([&] { read_image_file(gray, 3, out); }), gray);
  read_image_file(gray, 1, out);
  EXPECT_EQ(out.shape, (Shape{1, 1, 1}));
}

// stb_image 2.27 decodes a PNM header promising more pixels than the file holds into zeros (found
// by tests/fuzz/image_fuzz.cpp: 13 bytes became 100 MB): the header is held against the file.
TEST_F(ImageCodec, PnmHeaderPromisingMoreThanTheFileIsTruncated) {
  Image out;
  const std::string tall = write_file("tall.pgm", "P5 3 33333333");
  EXPECT_CONTAINS(error_of([&] { read_image_file(tall, 1, out); }), tall + "' is truncated");
  const std::string big = write_file("big.ppm", "P6 4000 4000 255\n" + std::string(30, 'x'));
  EXPECT_EQ(
      error_of([&] { read_image_file(big, 3, out); }),
      "image '" + big +
          "' is truncated: its PNM header says 4000 x 4000 uncompressed pixels, 48000000 bytes, "
          "but the file has 47");
  const std::string whole = write_file("whole.ppm", "P6 2 1 255\n" + std::string(6, 'x'));
  read_image_file(whole, 3, out);
  EXPECT_EQ(out.shape, (Shape{3, 1, 2}));
}

// A TGA file: the 18-byte header (no id, no colour map) and `pixels`.
std::string tga(int type, int width, int height, int bits, const std::string& pixels) {
  std::string header(18, '\0');
  header[2] = char(type);
  header[12] = char(width & 255);
  header[13] = char(width >> 8);
  header[14] = char(height & 255);
  header[15] = char(height >> 8);
  header[16] = char(bits);
  header[17] = 0x20;  // top-left origin
  return header + pixels;
}

// A 24-bit BMP file (BITMAPINFOHEADER, no compression) with `pixels` after its 54-byte header;
// a negative height stores the rows top-down.
std::string bmp(int width, int height, const std::string& pixels) {
  auto le32 = [](uint32_t v) {
    return std::string{char(v & 255), char((v >> 8) & 255), char((v >> 16) & 255), char(v >> 24)};
  };
  return "BM" + le32(uint32_t(54 + pixels.size())) + le32(0) + le32(54) + le32(40) +
         le32(uint32_t(width)) + le32(uint32_t(height)) + std::string("\x01\x00\x18\x00", 4) +
         le32(0) + le32(uint32_t(pixels.size())) + std::string(16, '\0') + pixels;
}

// stb_image 2.27 reads an uncompressed TGA or BMP into width x height pixels however short the
// file (found by tests/fuzz/image_fuzz.cpp: 36 bytes claiming 13904 x 12810 pixels, 178 M zeros
// and a timeout): the header is held against the file, as for PNM. Whole files still decode.
TEST_F(ImageCodec, UncompressedHeaderPromisingMoreThanTheFileIsTruncated) {
  Image out;
  const std::string huge = write_file("huge.tga", tga(2, 13904, 12810, 24, std::string(18, 'x')));
  EXPECT_EQ(error_of([&] { read_image_file(huge, 3, out); }),
            "image '" + huge +
                "' is truncated: its TGA header says 13904 x 12810 uncompressed pixels, "
                "534330720 bytes, but the file has 36");
  EXPECT_CONTAINS(error_of([&] { image_file_shape(huge, 3); }), huge + "' is truncated");
  const std::string gray = write_file("gray.tga", tga(3, 3000, 3000, 8, std::string(40, 'x')));
  EXPECT_CONTAINS(error_of([&] { read_image_file(gray, 1, out); }), "its TGA header says");
  const std::string wide = write_file("wide.bmp", bmp(5000, 5000, std::string(64, 'x')));
  EXPECT_CONTAINS(error_of([&] { read_image_file(wide, 3, out); }),
                  "its BMP header says 5000 x 5000 uncompressed pixels, 75000000 bytes");
  // No pixels: stb would loop over 16 M empty rows (found by tests/fuzz/image_fuzz.cpp).
  const std::string empty = write_file("empty.bmp", bmp(0, 16442880, std::string(64, 'x')));
  EXPECT_CONTAINS(error_of([&] { read_image_file(empty, 3, out); }),
                  empty + "' has no pixels: its header says 0 x 16442880");
  // RLE TGA is compressed: only the pixel limit bounds it.
  const std::string rle = write_file("rle.tga", tga(10, 20000, 20000, 24, std::string(18, 'x')));
  EXPECT_CONTAINS(error_of([&] { read_image_file(rle, 3, out); }), "decompression bomb");

  // 2 x 1 pixels, stored B, G, R: (10, 20, 30) then (40, 50, 60).
  const std::string pixels("\x1e\x14\x0a\x3c\x32\x28", 6);
  read_image_file(write_file("whole.tga", tga(2, 2, 1, 24, pixels)), 3, out);
  EXPECT_EQ(out.pixels, (std::vector<float>{10, 40, 20, 50, 30, 60}));
  read_image_file(write_file("whole.bmp", bmp(2, 1, pixels + std::string(2, '\0'))), 3, out);
  EXPECT_EQ(out.pixels, (std::vector<float>{10, 40, 20, 50, 30, 60}));
  // A top-down BMP (negative height): the first stored row is the top one.
  const std::string rows =
      pixels + std::string(2, '\0') + std::string(6, '\0') + std::string(2, '\0');
  read_image_file(write_file("top_down.bmp", bmp(2, -2, rows)), 3, out);
  EXPECT_EQ(out.shape, (Shape{3, 2, 2}));
  EXPECT_EQ(out.pixels, (std::vector<float>{10, 40, 0, 0, 20, 50, 0, 0, 30, 60, 0, 0}));
}

// stb_image allocates a PNG chunk's declared length before reading it (found by
// tests/fuzz/image_fuzz.cpp: 118 bytes declaring a 1 GB chunk, a timeout): every chunk must fit.
TEST_F(ImageCodec, PngChunkLongerThanTheFileIsTruncated) {
  write_image_file(path("whole.png"), pattern_image(3, 3, 2), ImageFormat::png);
  std::string bytes = testing::read_file(path("whole.png"));
  const size_t idat = bytes.find("IDAT") - 4;
  bytes[idat] = 0x40;  // the IDAT length's high byte: 1 GiB more
  const std::string lying = write_file("lying.png", bytes);
  Image out;
  const std::string message = error_of([&] { read_image_file(lying, 3, out); });
  EXPECT_CONTAINS(message, lying + "' is truncated: its PNG chunk 'IDAT' at byte " +
                               std::to_string(idat) + " declares 10737418");
  EXPECT_CONTAINS(error_of([&] { image_file_shape(lying, 3); }), "PNG chunk 'IDAT'");
  read_image_file(path("whole.png"), 3, out);
  EXPECT_EQ(out.pixels, pattern_image(3, 3, 2).pixels);
}

TEST_F(ImageCodec, FormatsByName) {
  EXPECT_EQ(parse_image_format("png"), ImageFormat::png);
  EXPECT_EQ(parse_image_format("jpg"), ImageFormat::jpeg);
  EXPECT_EQ(parse_image_format("jpeg"), ImageFormat::jpeg);
  EXPECT_CONTAINS(error_of([] { parse_image_format("tiff"); }), "png, jpg");
  EXPECT_CONTAINS(error_of([&] {
                    write_image_file(path("two.png"), pattern_image(2, 2, 2), ImageFormat::png);
                  }),
                  "two.png");
}

TEST(ImageOps, CropReadsZerosOutsideTheImage) {
  // 1 x 3 x 4, x[h, w] = 10 h + w + 1.
  const Image in = from_rows({1, 3, 4}, {1, 2, 3, 4, 11, 12, 13, 14, 21, 22, 23, 24});
  Image out;
  crop(in, {-1, 2, 3, 3}, out);  // rows -1..1, columns 2..4
  EXPECT_EQ(out.shape, (Shape{1, 3, 3}));
  EXPECT_EQ(out.pixels, (std::vector<float>{0, 0, 0, 3, 4, 0, 13, 14, 0}));
  crop(in, {1, 0, 2, 2}, out);
  EXPECT_EQ(out.pixels, (std::vector<float>{11, 12, 21, 22}));
  crop(in, {5, 5, 1, 2}, out);  // entirely outside
  EXPECT_EQ(out.pixels, (std::vector<float>{0, 0}));
}

TEST(ImageOps, FlipMirrorsEveryRowOfEveryChannel) {
  Image image = from_rows({2, 2, 3}, {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12});
  flip_horizontal(image);
  EXPECT_EQ(image.pixels, (std::vector<float>{3, 2, 1, 6, 5, 4, 9, 8, 7, 12, 11, 10}));
}

TEST(ImageOps, TorchvisionSizeRules) {
  EXPECT_EQ(shorter_side_size(30, 40, 15).height, 15);
  EXPECT_EQ(shorter_side_size(30, 40, 15).width, 20);
  EXPECT_EQ(shorter_side_size(40, 30, 15).height, 20);
  EXPECT_EQ(shorter_side_size(7, 10, 4).width, 5);  // 4 * 10 / 7 = 5.71, truncated
  EXPECT_EQ(shorter_side_size(9, 9, 4).height, 4);
  EXPECT_EQ(shorter_side_size(9, 9, 4).width, 4);
  // round((H - h) / 2) with halves to even: (5 - 2) / 2 = 1.5 -> 2; (3 - 2) / 2 = 0.5 -> 0.
  CropBox box = center_crop_box(5, 3, 2, 2);
  EXPECT_EQ(box.top, 2);
  EXPECT_EQ(box.left, 0);
  box = center_crop_box(4, 4, 6, 7);  // larger: centred on padding
  EXPECT_EQ(box.top, -1);
  EXPECT_EQ(box.left, -1);
}

TEST(ImageOps, RandomResizedCropBoxFitsAndFallsBack) {
  Random random(3);
  for (int i = 0; i < 200; ++i) {
    const CropBox box = random_resized_crop_box(20, 30, 0.08, 1.0, 3.0 / 4.0, 4.0 / 3.0, random);
    EXPECT_GE(box.top, 0);
    EXPECT_GE(box.left, 0);
    EXPECT_LE(box.top + box.height, 20);
    EXPECT_LE(box.left + box.width, 30);
    EXPECT_GE(box.height * box.width, 1);
  }
  // The whole 2 x 4 area at ratio 1 never fits (a 2.8 x 2.8 square): the centred 2 x 2.
  const CropBox box = random_resized_crop_box(2, 4, 1.0, 1.0, 1.0, 1.0, random);
  EXPECT_EQ(box.top, 0);
  EXPECT_EQ(box.left, 1);
  EXPECT_EQ(box.height, 2);
  EXPECT_EQ(box.width, 2);
}

TEST(ImageOps, ResizeIsTheTriangleFilter) {
  Image out;
  // Shrinking 4 -> 2: output centres at input 1.0 and 3.0, the triangle widened to 2 pixels:
  // pixel centres 0.5, 1.5, 2.5 weigh 0.75, 0.75, 0.25 for the first (pixel -1 lies outside:
  // the weights are divided by their sum 1.75, as PIL and torchvision do), so
  // (0.75 * 0 + 0.75 * 10 + 0.25 * 20) / 1.75 = 50 / 7, and (0.25 * 10 + 0.75 * 20 + 0.75 * 30)
  // / 1.75 = 160 / 7.
  resize(from_rows({1, 1, 4}, {0, 10, 20, 30}), 1, 2, out);
  ASSERT_EQ(out.shape, (Shape{1, 1, 2}));
  EXPECT_NEAR(out.pixels[0], 50.0f / 7.0f, 1e-4);
  EXPECT_NEAR(out.pixels[1], 160.0f / 7.0f, 1e-4);
  // Growing 2 -> 4 (a column, so along H): centres at 0.25, 0.75, 1.25, 1.75 interpolate
  // linearly between pixel centres 0.5 and 1.5, clamped outside: 0, 10, 30, 40.
  resize(from_rows({1, 2, 1}, {0, 40}), 4, 1, out);
  ASSERT_EQ(out.shape, (Shape{1, 4, 1}));
  const std::vector<float> expected = {0, 10, 30, 40};
  for (size_t i = 0; i < 4; ++i) EXPECT_NEAR(out.pixels[i], expected[i], 1e-4) << i;
  // Channels are resized independently; the same size is a copy.
  const Image two = pattern_image(2, 3, 3);
  resize(two, 3, 3, out);
  EXPECT_EQ(out.pixels, two.pixels);
}

}  // namespace
}  // namespace crema::data
