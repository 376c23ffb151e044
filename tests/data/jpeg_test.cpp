// JPEG through libjpeg-turbo (data/jpeg.h) and the bad files every decoder must survive: each
// decodes correctly or is an error naming the file, never a crash. The files are made here:
// JPEGs by crema's encoder or, for CMYK/YCCK, by libjpeg directly; the others byte by byte.
#include "data/jpeg.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

// jpeglib.h needs size_t and FILE declared first.
#include <jpeglib.h>

#include "data/image.h"
#include "data/image_files.h"
#include "data/loader.h"
#include "data/transform.h"
#include "tests/data/data_test_util.h"

namespace crema::data {
namespace {

using testing::DataFiles;
using testing::error_of;
using testing::pattern_image;

// Mean absolute difference of two images of one shape.
double mean_abs_diff(const Image& a, const Image& b) {
  EXPECT_EQ(a.shape, b.shape);
  double total = 0;
  for (size_t i = 0; i < a.pixels.size() && i < b.pixels.size(); ++i) {
    total += std::fabs(a.pixels[i] - b.pixels[i]);
  }
  return total / double(a.pixels.size());
}

// A smooth C x H x W image (JPEG keeps it within a few levels at quality 95).
Image smooth_image(int64_t channels, int64_t height, int64_t width) {
  Image image;
  image.reset({channels, height, width});
  for (int64_t c = 0; c < channels; ++c) {
    for (int64_t h = 0; h < height; ++h) {
      for (int64_t w = 0; w < width; ++w) {
        image.pixels[size_t((c * height + h) * width + w)] =
            float(20 + 40 * c + (100 * h) / height + (40 * w) / width);
      }
    }
  }
  return image;
}

Image from_value(int64_t channels, int64_t height, int64_t width, float value) {
  Image image;
  image.reset({channels, height, width});
  std::fill(image.pixels.begin(), image.pixels.end(), value);
  return image;
}

// 16 x 16 CMYK pixels in four 8 x 8 quadrants of one ink each (whole JPEG blocks, so the
// decoded values stay within a level or two): C, M, Y, K as 0..255 amounts of ink.
constexpr uint8_t kQuadrantInks[4][4] = {
    {200, 0, 0, 0}, {0, 150, 30, 0}, {20, 40, 220, 10}, {0, 0, 0, 100}};

// The JPEG of those quadrants in `space` (JCS_CMYK or JCS_YCCK). `adobe`: Photoshop's
// convention, an Adobe marker and the inks stored inverted (255 = no ink); otherwise no marker
// and plain inks.
std::string cmyk_jpeg(J_COLOR_SPACE space, bool adobe) {
  jpeg_compress_struct info{};
  jpeg_error_mgr errors{};
  info.err = jpeg_std_error(&errors);
  jpeg_create_compress(&info);
  unsigned char* buffer = nullptr;
  unsigned long size = 0;
  jpeg_mem_dest(&info, &buffer, &size);
  info.image_width = 16;
  info.image_height = 16;
  info.input_components = 4;
  info.in_color_space = JCS_CMYK;
  jpeg_set_defaults(&info);
  jpeg_set_colorspace(&info, space);
  info.write_Adobe_marker = adobe;
  jpeg_set_quality(&info, 95, TRUE);
  for (int c = 0; c < info.num_components; ++c) {
    info.comp_info[c].h_samp_factor = info.comp_info[c].v_samp_factor = 1;
  }
  jpeg_start_compress(&info, TRUE);
  std::vector<uint8_t> row(16 * 4);
  while (info.next_scanline < 16) {
    for (int x = 0; x < 16; ++x) {
      const uint8_t* ink = kQuadrantInks[(info.next_scanline / 8) * 2 + x / 8];
      for (int c = 0; c < 4; ++c) row[size_t(x * 4 + c)] = adobe ? 255 - ink[c] : ink[c];
    }
    JSAMPROW rows[1] = {row.data()};
    jpeg_write_scanlines(&info, rows, 1);
  }
  jpeg_finish_compress(&info);
  jpeg_destroy_compress(&info);
  std::string bytes(reinterpret_cast<const char*>(buffer), size);
  std::free(buffer);
  return bytes;
}

// A progressive 8 x 8 gray JPEG (libjpeg's simple progression) whose last scan is repeated
// `repeats` more times: each repeat is a refinement libjpeg warns about and decodes anyway.
std::string progressive_jpeg(int repeats) {
  jpeg_compress_struct info{};
  jpeg_error_mgr errors{};
  info.err = jpeg_std_error(&errors);
  jpeg_create_compress(&info);
  unsigned char* buffer = nullptr;
  unsigned long size = 0;
  jpeg_mem_dest(&info, &buffer, &size);
  info.image_width = info.image_height = 8;
  info.input_components = 1;
  info.in_color_space = JCS_GRAYSCALE;
  jpeg_set_defaults(&info);
  jpeg_simple_progression(&info);
  jpeg_start_compress(&info, TRUE);
  std::vector<uint8_t> row(8);
  while (info.next_scanline < 8) {
    for (int x = 0; x < 8; ++x) row[size_t(x)] = uint8_t(16 * x + info.next_scanline);
    JSAMPROW rows[1] = {row.data()};
    jpeg_write_scanlines(&info, rows, 1);
  }
  jpeg_finish_compress(&info);
  jpeg_destroy_compress(&info);
  const std::string bytes(reinterpret_cast<const char*>(buffer), size);
  std::free(buffer);
  const size_t last = bytes.rfind("\xFF\xDA"), eoi = bytes.rfind("\xFF\xD9");
  std::string out = bytes.substr(0, eoi);
  for (int i = 0; i < repeats; ++i) out += bytes.substr(last, eoi - last);
  return out + "\xFF\xD9";
}

class Jpeg : public DataFiles {
 protected:
  // Writes `image` as the JPEG file `name` and returns its bytes.
  std::string jpeg_bytes(const std::string& name, const Image& image, int quality = 95) const {
    write_image_file(path(name), image, ImageFormat::jpeg, quality);
    return testing::read_file(path(name));
  }
};

TEST_F(Jpeg, RoundTripIsCloseInGrayAndRgb) {
  for (int channels : {1, 3}) {
    const Image image = smooth_image(channels, 24, 40);
    const std::string file = path("smooth" + std::to_string(channels) + ".jpg");
    write_image_file(file, image, ImageFormat::jpeg, 95);
    EXPECT_EQ(image_file_shape(file, channels), image.shape);
    Image back;
    read_image_file(file, channels, back);
    EXPECT_LT(mean_abs_diff(back, image), 1.5) << channels;
  }
}

TEST_F(Jpeg, GrayFileReadAsRgbCopiesTheGray) {
  const Image gray = smooth_image(1, 16, 16);
  const std::string file = path("gray.jpg");
  write_image_file(file, gray, ImageFormat::jpeg, 95);
  Image rgb;
  read_image_file(file, 3, rgb);
  ASSERT_EQ(rgb.shape, (Shape{3, 16, 16}));
  for (size_t i = 0; i < 256; ++i) {
    EXPECT_EQ(rgb.pixels[i], rgb.pixels[256 + i]);
    EXPECT_EQ(rgb.pixels[i], rgb.pixels[512 + i]);
    EXPECT_NEAR(rgb.pixels[i], gray.pixels[i], 4.0f);
  }
}

// CMYK -> RGB as PIL converts: R = (255 - C)(255 - K) / 255, G from M, B from Y.
TEST_F(Jpeg, CmykAndYcckFilesDecodeToRgb) {
  struct Case {
    const char* name;
    J_COLOR_SPACE space;
    bool adobe;
  };
  for (const Case& c :
       {Case{"adobe_cmyk.jpg", JCS_CMYK, true}, Case{"plain_cmyk.jpg", JCS_CMYK, false},
        Case{"adobe_ycck.jpg", JCS_YCCK, true}}) {
    const std::string file = write_file(c.name, cmyk_jpeg(c.space, c.adobe));
    Image rgb, gray;
    read_image_file(file, 3, rgb);
    read_image_file(file, 1, gray);
    ASSERT_EQ(rgb.shape, (Shape{3, 16, 16})) << c.name;
    for (int q = 0; q < 4; ++q) {
      const uint8_t* ink = kQuadrantInks[q];
      const int64_t y = (q / 2) * 8 + 4, x = (q % 2) * 8 + 4;  // inside the quadrant
      float expected[3];
      for (int k = 0; k < 3; ++k) {
        expected[k] = float((255 - ink[k]) * (255 - ink[3])) / 255.0f;
        EXPECT_NEAR(rgb.pixels[size_t((k * 16 + y) * 16 + x)], expected[k], 3.0f)
            << c.name << " quadrant " << q << " channel " << k;
      }
      EXPECT_NEAR(gray.pixels[size_t(y * 16 + x)],
                  (77 * expected[0] + 150 * expected[1] + 29 * expected[2]) / 256, 3.0f)
          << c.name << " quadrant " << q;
    }
  }
}

TEST_F(Jpeg, TruncatedFileIsAnErrorNamingIt) {
  const std::string bytes = jpeg_bytes("whole.jpg", pattern_image(3, 64, 64));
  for (size_t keep : {bytes.size() / 2, bytes.size() - 2, size_t(300)}) {
    const std::string cut = write_file("cut.jpg", bytes.substr(0, keep));
    Image out;
    const std::string message = error_of([&] { read_image_file(cut, 3, out); });
    EXPECT_CONTAINS(message, cut);
    EXPECT_CONTAINS(message, "truncated");
  }
  const std::string header_only = write_file("header.jpg", bytes.substr(0, 20));
  Image out;
  EXPECT_CONTAINS(error_of([&] { read_image_file(header_only, 3, out); }), header_only);
  EXPECT_CONTAINS(error_of([&] { image_file_shape(header_only, 3); }), header_only);
}

TEST_F(Jpeg, FormatIsSniffedNotTakenFromTheName) {
  const Image image = pattern_image(3, 5, 7);
  write_image_file(path("really.png"), image, ImageFormat::png);
  const std::string png_named_jpg = write_file("png.jpg", testing::read_file(path("really.png")));
  Image back;
  read_image_file(png_named_jpg, 3, back);
  EXPECT_EQ(back.pixels, image.pixels);  // lossless: the PNG it is
  const std::string jpg_named_png = write_file("jpg.png", jpeg_bytes("x.jpg", image));
  read_image_file(jpg_named_png, 3, back);
  EXPECT_EQ(back.shape, image.shape);
}

// stb_image would decode a JPEG after fill bytes (FF FF D8 ...), and overflow its Huffman table
// on a crafted one (found by tests/fuzz/image_fuzz.cpp): JPEG is libjpeg-turbo's alone, which
// wants the SOI marker first.
TEST_F(Jpeg, FillBytesBeforeTheMarkerAreRefused) {
  const std::string padded =
      write_file("padded.jpg", "\xFF" + jpeg_bytes("x.jpg", pattern_image(3, 8, 8)));
  Image out;
  const std::string message = error_of([&] { read_image_file(padded, 3, out); });
  EXPECT_CONTAINS(message, padded);
  EXPECT_CONTAINS(message, "cannot decode");
  // The fuzzer's input (202 bytes).
  const std::string found = write_file(
      "found.jpg",
      std::string("\xff\xff\xd8\xff\xe0\x00\x10\x4a\x46\xc0\x49\x46\x00\x01\x01\x00\x00\x01\x00\x01"
                  "\x00\x00\xff\xdb\x00\x43\x00\x08\x06\x06\x00\x08\xa3\x01\xe0\x87\x60\x48\x5e\x00"
                  "\x00\x00\x00\x2a\x45\x4e\x44\xae\x42\x60\x82\x07\x2e\x05\x08\x07\x07\x07\x09\x09"
                  "\x08\x0a\x0c\x14\x0d\x0c\x0b\x0b\x0c\x19\x12\x13\x0f\x14\x1d\x1a\x1f\x1e\x1d\x1a"
                  "\x1c\x1c\x20\x24\x2e\x27\x20\x38\x32\x3c\x2e\x33\x34\x32\xff\xc0\x00\x0b\x08\x00"
                  "\x08\x00\x08\x01\x01\x11\x00\xff\xc4\x00\x14\x00\x01\x00\x00\x00\x00\x00\x00\x00"
                  "\x00\x00\x00\x00\xff\xc0\x00\x0b\x08\x00\x08\x00\x08\x01\x01\x11\x00\x5b\xff\xc4"
                  "\x00\x14\x00\x01\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\xff\xd8\xff\x00\x5b"
                  "\x11\x21\x00\x07\x12\xff\xda\x00\x08\x01\x01\x00\x00\x3f\x00\x1e\xab\xc3\x1c\xb9"
                  "\xd7\x46\x87\x9c\x61\x24\xfb\xa5\x28\xc1\x55\x14\x0e\x49\x24\xf4\x00\x1d\xf3\xe7"
                  "\xff\xd9",
                  202));
  EXPECT_CONTAINS(error_of([&] { read_image_file(found, 3, out); }), found);
}

TEST_F(Jpeg, OnePixelImages) {
  const Image one = from_value(3, 1, 1, 120.0f);
  for (ImageFormat format : {ImageFormat::jpeg, ImageFormat::png}) {
    const std::string file = path(std::string("one") + image_extension(format));
    write_image_file(file, one, format);
    Image back;
    read_image_file(file, 3, back);
    ASSERT_EQ(back.shape, (Shape{3, 1, 1}));
    for (float v : back.pixels) EXPECT_NEAR(v, 120.0f, 2.0f);
  }
}

// A JPEG whose SOF header says `height` x `width`, made by patching a small one's frame header.
std::string with_frame_size(std::string jpeg, int height, int width) {
  for (size_t i = 0; i + 8 < jpeg.size(); ++i) {
    const auto marker = uint8_t(jpeg[i + 1]);
    if (uint8_t(jpeg[i]) == 0xFF && (marker == 0xC0 || marker == 0xC2)) {
      jpeg[i + 5] = char(height >> 8);
      jpeg[i + 6] = char(height & 255);
      jpeg[i + 7] = char(width >> 8);
      jpeg[i + 8] = char(width & 255);
      return jpeg;
    }
  }
  ADD_FAILURE() << "no SOF marker";
  return jpeg;
}

TEST_F(Jpeg, DecompressionBombIsRefusedFromItsHeader) {
  const std::string bomb = write_file(
      "bomb.jpg", with_frame_size(jpeg_bytes("small.jpg", pattern_image(3, 16, 16)), 20000, 20000));
  Image out;
  const auto start = std::chrono::steady_clock::now();
  const std::string message = error_of([&] { read_image_file(bomb, 3, out); });
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(1));
  EXPECT_CONTAINS(message, bomb);
  EXPECT_CONTAINS(message, "20000 x 20000 = 400000000 pixels, above the limit of 178956970");
  EXPECT_CONTAINS(error_of([&] { image_file_shape(bomb, 3); }), "decompression bomb");
  // The limit is the caller's: 16 x 16 = 256 pixels pass 256 and fail 255, JPEG or PNG.
  DecodeOptions options;
  options.max_pixels = 256;
  read_image_file(path("small.jpg"), 3, out, options);
  write_image_file(path("small.png"), pattern_image(3, 16, 16), ImageFormat::png);
  read_image_file(path("small.png"), 3, out, options);
  options.max_pixels = 255;
  for (const char* name : {"small.jpg", "small.png"}) {
    EXPECT_CONTAINS(error_of([&] { read_image_file(path(name), 3, out, options); }),
                    "above the limit of 255");
  }
  EXPECT_CONTAINS(error_of([&] { image_file_shape(path("small.png"), 3, 255); }), "small.png");
}

TEST_F(Jpeg, ManyProgressiveScansAreRefused) {
  Image out;
  read_image_file(write_file("few.jpg", progressive_jpeg(10)), 1, out);
  EXPECT_EQ(out.shape, (Shape{1, 8, 8}));
  const std::string many = write_file("many.jpg", progressive_jpeg(kMaxJpegScans));
  const std::string message = error_of([&] { read_image_file(many, 1, out); });
  EXPECT_CONTAINS(message, many);
  EXPECT_CONTAINS(message, "more than 500 progressive scans");
}

TEST_F(Jpeg, UnreadableFileIsAnErrorNamingIt) {
  const std::string folder = path("folder.jpg");
  std::filesystem::create_directories(folder);
  Image out;
  EXPECT_CONTAINS(error_of([&] { read_image_file(folder, 3, out); }), folder);
  EXPECT_CONTAINS(error_of([&] { image_file_shape(folder, 3); }), folder);
  const std::string missing = path("missing.jpg");
  EXPECT_CONTAINS(error_of([&] { read_image_file(missing, 3, out); }), missing);
}

TEST_F(Jpeg, BadFilesInAFolderAreSkipped) {
  const std::string good = jpeg_bytes("good.jpg", pattern_image(3, 32, 32));
  write_file("set/a/0.jpg", good);
  write_file("set/a/1.jpg", good.substr(0, good.size() / 2));      // truncated
  write_file("set/a/2.jpg", with_frame_size(good, 20000, 20000));  // a bomb
  write_file("set/b/3.jpg", good);
  write_file("set/b/4.jpg", good);
  std::shared_ptr<const Dataset> dataset = load_image_folder(path("set"), 3);
  ASSERT_EQ(dataset->size(), 5);
  DataLoaderOptions options;
  options.batch_size = 3;
  options.skip_bad = true;
  std::vector<std::string> reports;
  options.report = [&](const std::string& line) { reports.push_back(line); };
  DataLoader loader(dataset, options);
  EXPECT_EQ(loader.next().labels.to_vector(), (std::vector<float>{0, 1, 1}));  // 0, 3, 3
  EXPECT_EQ(loader.next().labels.to_vector(), (std::vector<float>{1, 1}));     // 3, 4
  ASSERT_EQ(reports.size(), 1u);
  EXPECT_CONTAINS(reports[0], "skipped 2 bad sample");
  EXPECT_CONTAINS(reports[0], path("set/a/1.jpg"));
}

TEST(ReductionRule, LargestFactorThatKeepsTheOutputSize) {
  EXPECT_EQ(decode_reduction_for({256, 256}, {32, 32}), 8);
  EXPECT_EQ(decode_reduction_for({255, 256}, {32, 32}), 4);  // 255 / 8 < 32 rows
  EXPECT_EQ(decode_reduction_for({375, 500}, {64, 64}), 4);
  EXPECT_EQ(decode_reduction_for({375, 500}, {160, 160}), 2);
  EXPECT_EQ(decode_reduction_for({375, 500}, {224, 224}), 1);
  EXPECT_EQ(decode_reduction_for({10, 10}, {20, 20}), 1);  // growing: full size
}

// The next transform sees an image as it is: resize hands on reduction 1, also when the reduced
// image already has the target's size (resize then copies it).
TEST(ReductionRule, ResizeHandsOnAnUnreducedImage) {
  Image image;
  image.reset({1, 48, 64});
  image.reduction = 8;
  image.full = {384, 512};
  Random random(1);
  make_transform({"resize", {48.0f}})->apply(image, random);
  EXPECT_EQ(image.shape, (Shape{1, 48, 64}));
  EXPECT_EQ(image.reduction, 1);
  EXPECT_EQ(image.full_size().height, 48);
}

// A dataset that records the reduction each JPEG was decoded at.
class RecordingDataset : public Dataset {
 public:
  explicit RecordingDataset(std::shared_ptr<const Dataset> inner) : inner_(std::move(inner)) {}
  int64_t size() const override { return inner_->size(); }
  const Shape& sample_shape() const override { return inner_->sample_shape(); }
  int64_t num_classes() const override { return inner_->num_classes(); }
  void read_sample(int64_t index, Image& out) const override { inner_->read_sample(index, out); }
  void read_sample_reduced(int64_t index, Image& out, const DecodePlanner& plan) const override {
    inner_->read_sample_reduced(index, out, plan);
    std::lock_guard<std::mutex> lock(mutex_);
    reductions.push_back(out.reduction);
  }
  int64_t label(int64_t index) const override { return inner_->label(index); }
  std::string description() const override { return "recording " + inner_->description(); }

  mutable std::vector<int> reductions;

 private:
  std::shared_ptr<const Dataset> inner_;
  mutable std::mutex mutex_;
};

// Photo-like content: smooth waves of a few scales per channel, different per file.
Image waves(int64_t height, int64_t width, int salt) {
  Image image;
  image.reset({3, height, width});
  for (int64_t c = 0; c < 3; ++c) {
    for (int64_t y = 0; y < height; ++y) {
      for (int64_t x = 0; x < width; ++x) {
        image.pixels[size_t((c * height + y) * width + x)] =
            float(128 + 60 * std::sin(double(x) / (17 + 5 * salt) + double(c)) +
                  40 * std::cos(double(y) / (23 + 3 * c)) +
                  15 * std::sin(double(x + 2 * y) / (5 + salt)));
      }
    }
  }
  return image;
}

class ReducedDecoding : public Jpeg {
 protected:
  // 8 photo-like 384 x 512 JPEGs (quality 90), the batches of `transforms` over them with and
  // without reduced decoding (same seed), and the reductions each run decoded at.
  void run(const std::vector<TransformSpec>& transforms) {
    std::filesystem::create_directories(path("set/a"));
    std::filesystem::create_directories(path("set/b"));
    for (int i = 0; i < 8; ++i) {
      write_image_file(path("set/" + std::string(i < 4 ? "a/" : "b/") + std::to_string(i) + ".jpg"),
                       waves(384, 512, i), ImageFormat::jpeg, 90);
    }
    for (bool reduced : {true, false}) {
      auto dataset = std::make_shared<RecordingDataset>(
          std::shared_ptr<const Dataset>(load_image_folder(path("set"), 3)));
      DataLoaderOptions options;
      options.batch_size = 8;
      options.seed = 5;
      options.reduced_decoding = reduced;
      for (const TransformSpec& spec : transforms)
        options.transforms.push_back(make_transform(spec));
      DataLoader loader(dataset, options);
      (reduced ? with : without) = loader.next().data.to_vector();
      (reduced ? reductions_with : reductions_without) = dataset->reductions;
    }
  }
  // Mean and largest |with - without|, in levels of 0..255.
  std::pair<double, double> difference() const {
    double total = 0, largest = 0;
    for (size_t i = 0; i < with.size(); ++i) {
      total += std::fabs(with[i] - without[i]);
      largest = std::max(largest, double(std::fabs(with[i] - without[i])));
    }
    return {total / double(with.size()), largest};
  }

  std::vector<float> with, without;
  std::vector<int> reductions_with, reductions_without;
};

// The scaled path is taken (1/8 for a 48-pixel shorter side of 384) and gives the full-size
// path's pixels within a mean of 2 and at most 10 levels of 255 (measured 1.58 and 7.3): both
// are antialiased, but the reduced one is libjpeg's 8 x 8 block averages where the full one
// is the antialiased triangle filter (data/resample.h), 16 pixels wide.
TEST_F(ReducedDecoding, ResizeIsCloseToTheFullSizePath) {
  run({{"resize", {48.0f}}});
  // The workers read ahead: each sample once per batch (an epoch here) assembled so far.
  ASSERT_GE(reductions_with.size(), 8u);
  for (int r : reductions_with) EXPECT_EQ(r, 8);
  EXPECT_EQ(reductions_without, std::vector<int>{});  // read_sample: no reduction asked
  ASSERT_EQ(with.size(), size_t(8 * 3 * 48 * 64));
  const auto [mean, largest] = difference();
  EXPECT_LT(mean, 2.0);
  EXPECT_LT(largest, 10.0);
}

// random_resized_crop draws its box on the file's full size (the same draws either way) and
// crops the box scaled by the reduction, its edges rounded: the same crops within half a reduced
// pixel, hence a looser bound than resize's: a mean of 4 and at most 24 levels of 255 (measured
// 3.2 and 15.0; a box shifted by half a reduced pixel moves the 24-pixel output by up to 0.3
// of its pixels).
TEST_F(ReducedDecoding, RandomResizedCropIsCloseToTheFullSizePath) {
  run({{"random_resized_crop", {24.0f}, {{"scale", {0.3f, 1.0f}}}}, {"horizontal_flip"}});
  ASSERT_GE(reductions_with.size(), 8u);
  EXPECT_GT(*std::max_element(reductions_with.begin(), reductions_with.end()), 1);
  ASSERT_EQ(with.size(), size_t(8 * 3 * 24 * 24));
  const auto [mean, largest] = difference();
  EXPECT_LT(mean, 4.0);
  EXPECT_LT(largest, 24.0);
}

}  // namespace
}  // namespace crema::data
