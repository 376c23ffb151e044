// Decoding a window of a JPEG (data/jpeg.h, DecodePlan): libjpeg-turbo's jpeg_skip_scanlines and
// jpeg_crop_scanline give the window's pixels exactly as a whole decode does, for every chroma
// subsampling, baseline and progressive, at every reduction; random_resized_crop decoding only
// its box gives the batches of whole decoding bit for bit.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

// jpeglib.h needs size_t and FILE declared first.
#include <jpeglib.h>

#include "core/random.h"
#include "data/image.h"
#include "data/image_files.h"
#include "data/image_ops.h"
#include "data/jpeg.h"
#include "data/loader.h"
#include "data/transform.h"
#include "tests/data/data_test_util.h"

namespace crema::data {
namespace {

using testing::DataFiles;
using testing::error_of;

struct Layout {
  const char* name;
  int components;      // 1 gray, 3 YCbCr
  int h_samp, v_samp;  // luma's sampling factors: 2, 2 is 4:2:0; 2, 1 is 4:2:2; 1, 1 is 4:4:4
  bool progressive;
};

// A height x width JPEG of photo-like content (waves and deterministic grain, so chroma varies
// between neighbours), quality 90, in `layout`.
std::string photo_jpeg(int height, int width, const Layout& layout) {
  jpeg_compress_struct info{};
  jpeg_error_mgr errors{};
  info.err = jpeg_std_error(&errors);
  jpeg_create_compress(&info);
  unsigned char* buffer = nullptr;
  unsigned long size = 0;
  jpeg_mem_dest(&info, &buffer, &size);
  info.image_width = JDIMENSION(width);
  info.image_height = JDIMENSION(height);
  info.input_components = layout.components;
  info.in_color_space = layout.components == 1 ? JCS_GRAYSCALE : JCS_RGB;
  jpeg_set_defaults(&info);
  jpeg_set_quality(&info, 90, TRUE);
  info.comp_info[0].h_samp_factor = layout.h_samp;
  info.comp_info[0].v_samp_factor = layout.v_samp;
  if (layout.progressive) jpeg_simple_progression(&info);
  jpeg_start_compress(&info, TRUE);
  std::vector<uint8_t> row(size_t(width * layout.components));
  uint32_t grain = 12345;
  while (info.next_scanline < info.image_height) {
    const double y = info.next_scanline;
    for (int x = 0; x < width; ++x) {
      for (int c = 0; c < layout.components; ++c) {
        grain = grain * 1664525u + 1013904223u;
        const double value = 128 + 60 * std::sin(x / (7.0 + 3 * c) + c) +
                             40 * std::cos(y / (5.0 + 2 * c)) + double(grain >> 28);
        row[size_t(x * layout.components + c)] = uint8_t(std::clamp(value, 0.0, 255.0));
      }
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

void decode(const std::string& bytes, int channels, DecodePlan plan, Image& out) {
  DecodeOptions options;
  options.plan = [plan](Size2) { return plan; };
  decode_jpeg(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size(), channels, "photo.jpg",
              options, out);
}

TEST(JpegWindow, WindowPixelsEqualTheWholeDecodes) {
  const Layout layouts[] = {{"4:2:0", 3, 2, 2, false},
                            {"4:2:2", 3, 2, 1, false},
                            {"4:4:4", 3, 1, 1, false},
                            {"4:2:0 progressive", 3, 2, 2, true},
                            {"gray progressive", 1, 1, 1, true}};
  Random random(7);
  for (const Layout& layout : layouts) {
    const std::string bytes = photo_jpeg(75, 101, layout);  // sizes off every block boundary
    for (int channels : {3, 1}) {
      for (int r : {1, 2, 4, 8}) {
        Image whole;
        decode(bytes, channels, {r}, whole);
        const int64_t height = whole.height(), width = whole.width();
        EXPECT_EQ(height, (75 + r - 1) / r);
        EXPECT_EQ(whole.is_part(), r > 1);
        std::vector<CropBox> windows = {{0, 0, height, width},
                                        {0, 0, 1, 1},
                                        {height - 1, width - 1, 1, 1},
                                        {1, width / 2, height - 1, width - width / 2}};
        for (int i = 0; i < 20; ++i) {
          const int64_t h = 1 + int64_t(random.below(uint64_t(height)));
          const int64_t w = 1 + int64_t(random.below(uint64_t(width)));
          windows.push_back({int64_t(random.below(uint64_t(height - h + 1))),
                             int64_t(random.below(uint64_t(width - w + 1))), h, w});
        }
        for (const CropBox& box : windows) {
          Image part, expected;
          decode(bytes, channels, {r, box.top, box.left, box.height, box.width}, part);
          crop(whole, box, expected);
          ASSERT_EQ(part.shape, expected.shape);
          EXPECT_EQ(part.pixels, expected.pixels)
              << layout.name << ", " << channels << " channel(s), 1/" << r << ", window ["
              << box.top << ", " << box.left << ", " << box.height << ", " << box.width << "]";
          EXPECT_EQ(part.top, box.top);
          EXPECT_EQ(part.left, box.left);
          EXPECT_EQ(part.full_size().height, 75);
          EXPECT_EQ(part.full_size().width, 101);
        }
      }
    }
  }
}

TEST(JpegWindow, WindowOutsideTheImageIsAnError) {
  const std::string bytes = photo_jpeg(16, 24, {"4:2:0", 3, 2, 2, false});
  Image out;
  const std::string message = error_of([&] { decode(bytes, 3, {2, 4, 0, 5, 12}, out); });
  EXPECT_CONTAINS(message, "photo.jpg");
  EXPECT_CONTAINS(message, "not inside its 8 x 12 pixels at 1/2");
}

class PlannedDecoding : public DataFiles {};

// random_resized_crop decodes only its box (at full size here: no box is twice the 48-pixel
// output), which changes nothing in the batches.
TEST_F(PlannedDecoding, RandomResizedCropBatchesEqualWholeDecoding) {
  for (int i = 0; i < 6; ++i) {
    write_file("set/c" + std::to_string(i % 2) + "/" + std::to_string(i) + ".jpg",
               photo_jpeg(60 + 7 * i, 90 - 5 * i, {"4:2:0", 3, 2, 2, i == 5}));
  }
  std::vector<std::vector<float>> batches;
  for (bool planned : {true, false}) {
    DataLoaderOptions options;
    options.batch_size = 6;
    options.seed = 3;
    options.reduced_decoding = planned;
    options.transforms.push_back(make_transform({"random_resized_crop", {48.0f}}));
    options.transforms.push_back(make_transform({"horizontal_flip"}));
    DataLoader loader(std::shared_ptr<const Dataset>(load_image_folder(path("set"), 3)), options);
    batches.push_back(loader.next().data.to_vector());
    const std::vector<float> second = loader.next().data.to_vector();  // the next epoch's boxes
    batches.back().insert(batches.back().end(), second.begin(), second.end());
  }
  EXPECT_EQ(batches[0], batches[1]);
}

}  // namespace
}  // namespace crema::data
