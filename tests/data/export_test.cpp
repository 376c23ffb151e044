// crema export-images and the data config (apps/training/data_config.h) on small generated sets: an
// IDX set exported to PNG reads back bit for bit through the image-folder and list-file sources.
#include <gtest/gtest.h>

#include <sstream>
#include <string>
#include <vector>

#include "apps/data_commands.h"
#include "apps/training/data_config.h"
#include "core/config.h"
#include "core/cuda_runtime.h"
#include "data/gpu_decode.h"
#include "data/idx.h"
#include "data/image_files.h"
#include "tests/data/data_test_util.h"
#include "tests/support/synthetic_data.h"

namespace crema {
namespace {

using data::testing::error_of;

class ExportImages : public data::testing::DataFiles {
 protected:
  void SetUp() override {
    DataFiles::SetUp();
    crema::testing::write_synthetic_idx(dir_.string(), 60, 5);  // 1 x 8 x 8, labels 0..9
    idx_ = data::load_idx_dataset(path("images.gz"), path("labels.gz"));
  }
  ExportImagesOptions idx_options(const std::string& out) const {
    ExportImagesOptions o;
    o.images = path("images.gz");
    o.labels = path("labels.gz");
    o.out_dir = path(out);
    return o;
  }
  std::unique_ptr<data::Dataset> idx_;
};

TEST_F(ExportImages, PngReadsBackBitForBit) {
  ExportImagesOptions o = idx_options("png");
  o.list_file = path("png/all.txt");
  std::ostringstream log;
  EXPECT_EQ(export_images_command(o, log), 60);
  EXPECT_CONTAINS(log.str(), "exported 60 images");
  // The list keeps the source order and labels: sample i is IDX sample i.
  const auto listed = data::load_image_list(path("png/all.txt"), "", 1);
  ASSERT_EQ(listed->size(), 60);
  data::Image a, b;
  for (int64_t i = 0; i < 60; ++i) {
    idx_->read_sample(i, a);
    listed->read_sample(i, b);
    EXPECT_EQ(a.shape, b.shape);
    EXPECT_EQ(a.pixels, b.pixels) << i;
    EXPECT_EQ(listed->label(i), idx_->label(i));
  }
  // The folder holds the same samples, class by class; labels agree because the folder names
  // (0 .. 9) sort in label order.
  const auto folder = data::load_image_folder(path("png"), 1);
  ASSERT_EQ(folder->size(), 60);
  EXPECT_EQ(folder->class_names()[3], "3");
  for (int64_t i = 0; i < 60; ++i) {
    const std::string name = folder->file(i).path;
    const int64_t source = std::stoll(name.substr(name.size() - 9, 5));  // <index>.png
    EXPECT_EQ(folder->label(i), idx_->label(source));
    idx_->read_sample(source, a);
    folder->read_sample(i, b);
    EXPECT_EQ(a.pixels, b.pixels) << name;
  }
}

TEST_F(ExportImages, ClassesPerClassLimitAndNames) {
  ExportImagesOptions o = idx_options("few");
  o.classes = {7, 2, 5};
  o.per_class = 2;
  o.class_names = {"c0", "c1", "c2", "c3", "c4", "c5", "c6", "c7", "c8", "c9"};
  std::ostringstream log;
  EXPECT_EQ(export_images_command(o, log), 6);
  const auto folder = data::load_image_folder(path("few"), 1);
  EXPECT_EQ(folder->class_names(), (std::vector<std::string>{"2_c2", "5_c5", "7_c7"}));
  ASSERT_EQ(folder->size(), 6);
  // The first two samples of each class, in source order.
  std::vector<int64_t> firsts;
  for (int64_t label : {2, 5, 7}) {
    int found = 0;
    for (int64_t i = 0; i < idx_->size() && found < 2; ++i) {
      if (idx_->label(i) == label) firsts.push_back(i), ++found;
    }
  }
  for (int64_t i = 0; i < 6; ++i) {
    const std::string name = folder->file(i).path;
    EXPECT_EQ(std::stoll(name.substr(name.size() - 9, 5)), firsts[size_t(i)]) << name;
    EXPECT_EQ(folder->label(i), i / 2);
  }
}

TEST_F(ExportImages, FromAConfigAsJpeg) {
  std::ostringstream log;
  export_images_command(idx_options("png"), log);
  write_file("png.yaml", "data:\n  train:\n    source: {format: image_folder, root: " +
                             path("png") + ", channels: 1}\n    batch_size: 4\n");
  ExportImagesOptions o;
  o.config = path("png.yaml");
  o.out_dir = path("jpg");
  o.format = "jpg";
  EXPECT_EQ(export_images_command(o, log), 60);
  const auto png = data::load_image_folder(path("png"), 1);
  const auto jpg = data::load_image_folder(path("jpg"), 1);
  EXPECT_EQ(jpg->class_names(), png->class_names());  // the source's own names are kept
  ASSERT_EQ(jpg->size(), 60);
  EXPECT_CONTAINS(jpg->file(0).path, ".jpg");
  EXPECT_EQ(jpg->sample_shape(), (Shape{1, 8, 8}));
}

TEST_F(ExportImages, BadOptionsAreErrors) {
  std::ostringstream log;
  ExportImagesOptions o = idx_options("x");
  o.config = path("png.yaml");
  EXPECT_CONTAINS(error_of([&] { export_images_command(o, log); }), "give one of the two");
  o = idx_options("x");
  o.out_dir = "";
  EXPECT_CONTAINS(error_of([&] { export_images_command(o, log); }), "--out");
  o = idx_options("x");
  o.classes = {12};
  EXPECT_CONTAINS(error_of([&] { export_images_command(o, log); }), "12 is not a class");
  o = idx_options("x");
  o.class_names = {"a", "b"};
  EXPECT_CONTAINS(error_of([&] { export_images_command(o, log); }), "2 names for the 10 classes");
  o = idx_options("x");
  o.format = "gif";
  EXPECT_CONTAINS(error_of([&] { export_images_command(o, log); }), "png, jpg");
}

// The data config: sources, classes by label or name, the transform list in its three forms.
TEST_F(ExportImages, DataConfigBuildsLoaders) {
  std::ostringstream log;
  export_images_command(idx_options("png"), log);
  const ConfigNode root = parse_config(R"(
train:
  source: {format: image_folder, root: )" + path("png") +
                                           R"(, channels: 1, classes: ['7', 3]}
  batch_size: 5
  workers: 2
  transform: [horizontal_flip, {random_crop: {size: 6, padding: 1}}, {scale: 0.5},
              {normalize: {mean: [0.5], std: [0.25]}}]
test:
  source: {format: idx, images: )" + path("images.gz") +
                                           ", labels: " + path("labels.gz") + R"(,
           classes: [3, 7]}
  batch_size: 4
)",
                                       "data.yaml");
  const auto train = make_loader(root, "train", 1);
  EXPECT_EQ(train->sample_shape(), (Shape{1, 6, 6}));
  EXPECT_EQ(train->options().transforms.size(), 4u);
  EXPECT_EQ(train->dataset().class_names(), (std::vector<std::string>{"7", "3"}));
  const data::Batch batch = train->next();
  EXPECT_EQ(batch.data.shape(), (Shape{5, 1, 6, 6}));
  const auto test = make_loader(root, "test", 1);
  EXPECT_EQ(test->dataset().num_classes(), 2);
  EXPECT_FALSE(test->options().shuffle);
  EXPECT_FALSE(test->options().drop_last);

  const ConfigNode bad =
      parse_config("train:\n  source: {format: image_folder, root: " + path("png") +
                       ", channels: 1}\n  batch_size: 4\n" +
                       "  transform: [{scale: 2}, {random_crop: {size: 6, pad: 1}}]\n",
                   "t.yaml");
  const std::string message = error_of([&] { make_loader(bad, "train", 1); });
  EXPECT_CONTAINS(message, "t.yaml:4:");
  EXPECT_CONTAINS(message, "unknown option 'pad'");

  // The decoder's keys: the pixel limit per source (8 x 8 = 64 pixels pass 64, fail 63),
  // reduced decoding per split (on by default).
  auto limited = [&](int64_t max_pixels, const std::string& more) {
    return parse_config("train:\n  source: {format: image_folder, root: " + path("png") +
                            ", channels: 1, max_image_pixels: " + std::to_string(max_pixels) +
                            "}\n  batch_size: 4\n" + more,
                        "limit.yaml");
  };
  EXPECT_TRUE(make_loader(limited(64, ""), "train", 1)->options().reduced_decoding);
  EXPECT_FALSE(make_loader(limited(64, "  reduced_decoding: false\n"), "train", 1)
                   ->options()
                   .reduced_decoding);
  EXPECT_CONTAINS(error_of([&] { make_loader(limited(63, ""), "train", 1); }),
                  "8 x 8 = 64 pixels, above the limit of 63");
  EXPECT_CONTAINS(error_of([&] { make_loader(limited(0, ""), "train", 1); }),
                  "max_image_pixels must be positive");

  // decode: cpu or gpu, at the key; gpu needs a build with nvJPEG and a GPU.
  std::string message_gpu =
      error_of([&] { make_loader(limited(64, "  decode: gpux\n"), "train", 1); });
  EXPECT_CONTAINS(message_gpu, "limit.yaml:4:");
  EXPECT_CONTAINS(message_gpu, "decode is cpu (the loader's workers) or gpu");
  // gpu_backend: auto, hybrid or mixed, for decode: gpu only; named at its line.
  std::string message_backend = error_of(
      [&] { make_loader(limited(64, "  decode: gpu\n  gpu_backend: engines\n"), "train", 1); });
  EXPECT_CONTAINS(message_backend, "limit.yaml:5:");
  EXPECT_CONTAINS(message_backend, "gpu_backend is auto");
  message_backend = error_of([&] { make_loader(limited(64, "  gpu_backend: hybrid\n"), "train", 1); });
  EXPECT_CONTAINS(message_backend, "limit.yaml:4:");
  EXPECT_CONTAINS(message_backend, "gpu_backend applies to decode: gpu only");
  if (!data::gpu_decoding_built() || gpu::device_count() == 0) {
    message_gpu = error_of([&] { make_loader(limited(64, "  decode: gpu\n"), "train", 1); });
    EXPECT_CONTAINS(message_gpu, "limit.yaml:4:");
    EXPECT_CONTAINS(message_gpu, data::gpu_decoding_built()
                                     ? "decode: gpu needs a CUDA GPU; none is visible"
                                     : "decode: gpu needs nvJPEG, which this build of crema lacks");
  }
}

// crema bench-loader: images/s per worker count, the transforms named as parsed (words included).
TEST_F(ExportImages, BenchLoaderReportsImagesPerSecond) {
  std::ostringstream log;
  export_images_command(idx_options("png"), log);
  write_file("bench.yaml",
             "seed: 1\ndata:\n  train:\n    source: {format: image_folder, root: " + path("png") +
                 ", channels: 1}\n    batch_size: 4\n    transform: [{resize: "
                 "{size: 12, interpolation: bicubic, antialias: false}}]\n");
  BenchLoaderOptions o;
  o.config = path("bench.yaml");
  o.workers = {0, 2};
  o.batches = 3;
  std::ostringstream out;
  const std::vector<double> rates = bench_loader_command(o, out);
  ASSERT_EQ(rates.size(), 2u);
  for (double rate : rates) EXPECT_GT(rate, 0.0);
  EXPECT_CONTAINS(out.str(), "transforms: resize(12, bicubic, antialias=false)");
  EXPECT_CONTAINS(out.str(), "images read, decoded, augmented and batched per second");
}

TEST(DataConfig, ErrorsPointIntoTheFile) {
  auto error = [](const std::string& source) {
    const ConfigNode root =
        parse_config("train:\n  source: " + source + "\n  batch_size: 4\n", "d.yaml");
    return error_of([&] { make_loader(root, "train", 1); });
  };
  std::string message = error("{format: tiff}");
  EXPECT_CONTAINS(message, "d.yaml:2:");
  EXPECT_CONTAINS(message, "idx, image_folder, image_list, packed, cifar10, cifar100");
  message = error("{format: image_folder, root: /nonexistent/crema}");
  EXPECT_CONTAINS(message, "d.yaml:2:");
  EXPECT_CONTAINS(message, "'/nonexistent/crema' does not exist");
  EXPECT_CONTAINS(error("{format: image_folder, root: x, channels: 4}"), "channels must be 1");
  EXPECT_CONTAINS(error("{format: cifar100, files: [a.bin], label: medium}"), "fine (100 classes)");
  EXPECT_CONTAINS(error("{format: image_list, list: l.txt, rooot: x}"), "did you mean 'root'");
}

}  // namespace
}  // namespace crema
