// Packed datasets (data/packed_writer.h, data/packed.h, data/packed_index.h) on small folders of
// JPEG and PNG files written by crema's encoders: the same batches as the folder, bit for bit;
// re-encoding at a maximum side; and every corruption of the index and the shards as one error
// naming the file (or skipped by the loader's skip_bad).
#include "data/packed.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "data/image_ops.h"
#include "data/loader.h"
#include "data/packed_index.h"
#include "data/packed_writer.h"
#include "tests/data/data_test_util.h"

namespace crema::data {
namespace {

namespace fs = std::filesystem;
using testing::DataFiles;
using testing::error_of;
using testing::read_file;

// A smooth C x H x W image (JPEG keeps it well) that differs with `salt`; values stay below 256
// up to 100 x 100 pixels.
Image smooth_image(int64_t channels, int64_t height, int64_t width, int salt) {
  Image image;
  image.reset({channels, height, width});
  for (int64_t c = 0; c < channels; ++c) {
    for (int64_t y = 0; y < height; ++y) {
      for (int64_t x = 0; x < width; ++x) {
        image.pixels[size_t((c * height + y) * width + x)] = float(20 + salt * 5 + c * 30 + y + x);
      }
    }
  }
  return image;
}

class Packed : public DataFiles {
 protected:
  // root/<class>/<i>.jpg|png: 3 classes, 11 files of several sizes, JPEG and PNG mixed.
  std::string photo_folder(const std::string& relative) {
    const char* classes[] = {"cat", "dog", "fox"};
    for (int i = 0; i < 11; ++i) {
      const fs::path dir = dir_ / relative / classes[i % 3];
      fs::create_directories(dir);
      const bool png = i % 4 == 3;
      const int64_t height = 40 + 8 * (i % 3), width = 56 - 8 * (i % 2);
      write_image_file((dir / (std::to_string(i) + (png ? ".png" : ".jpg"))).string(),
                       smooth_image(3, height, width, i),
                       png ? ImageFormat::png : ImageFormat::jpeg, 90);
    }
    return path(relative);
  }

  PackSummary pack(const ImageFileDataset& source, const std::string& out,
                   PackOptions options = {}) {
    return write_packed(source, path(out), options);
  }

  // Loader options that use every path of the pipeline: shuffling, reduced JPEG decoding
  // (random_resized_crop to 8 of images of 40 to 56 pixels), flips, two workers.
  static DataLoaderOptions augmenting(int workers) {
    DataLoaderOptions options;
    options.batch_size = 4;
    options.shuffle = true;
    options.seed = 7;
    options.num_workers = workers;
    options.transforms = {make_transform({"random_resized_crop", {8}}),
                          make_transform({"horizontal_flip"})};
    return options;
  }
};

// Two epochs of batches from each source, compared bit for bit.
void expect_same_batches(std::shared_ptr<const Dataset> a, std::shared_ptr<const Dataset> b,
                         const DataLoaderOptions& options_a, const DataLoaderOptions& options_b) {
  DataLoader first(std::move(a), options_a), second(std::move(b), options_b);
  ASSERT_EQ(first.batches_per_epoch(), second.batches_per_epoch());
  for (int64_t i = 0; i < 2 * first.batches_per_epoch(); ++i) {
    const Batch x = first.next(), y = second.next();
    EXPECT_EQ(x.data.to_vector(), y.data.to_vector()) << "batch " << i;
    EXPECT_EQ(x.labels.to_vector(), y.labels.to_vector()) << "batch " << i;
  }
}

TEST_F(Packed, FolderPackedGivesTheFoldersBatchesBitForBit) {
  std::shared_ptr<const ImageFileDataset> folder = load_image_folder(photo_folder("photos"), 3);
  PackOptions options;
  options.root = path("photos");
  options.shard_bytes = 4000;  // several shards
  const PackSummary summary = pack(*folder, "packed", options);
  EXPECT_EQ(summary.samples, 11);
  EXPECT_GT(summary.shards, 2u);
  EXPECT_EQ(summary.reencoded, 0);
  std::shared_ptr<const PackedDataset> packed = load_packed(path("packed"), 3);
  EXPECT_EQ(packed->size(), 11);
  EXPECT_EQ(packed->class_names(), folder->class_names());
  EXPECT_EQ(packed->num_classes(), 3);
  EXPECT_EQ(packed->sample_shape(), folder->sample_shape());
  EXPECT_EQ(packed->index().samples[4].path, "dog/1.jpg");  // sorted: dog/1, dog/10, dog/4
  std::vector<uint8_t> bytes;
  for (int64_t i = 0; i < 11; ++i) {
    EXPECT_EQ(packed->label(i), folder->label(i));
    packed->read_bytes(i, bytes);
    EXPECT_EQ(std::string(bytes.begin(), bytes.end()), read_file(folder->file(i).path)) << i;
  }
  expect_same_batches(std::move(folder), std::move(packed), augmenting(2), augmenting(0));
}

TEST_F(Packed, GrayAndFullSizeDecodingMatchTheFolderToo) {
  std::shared_ptr<const ImageFileDataset> folder = load_image_folder(photo_folder("photos"), 1);
  pack(*folder, "packed");
  DataLoaderOptions options = augmenting(1);
  options.reduced_decoding = false;
  options.shuffle = false;
  expect_same_batches(std::move(folder), load_packed(path("packed"), 1), options, options);
}

TEST_F(Packed, ListFileKeepsItsLabelsAndUnnamedClasses) {
  photo_folder("photos");
  write_file("photos/train.txt", "# path label\ncat/0.jpg 4\ndog/1.jpg 0\n\nfox/2.jpg 2\n");
  const auto list = load_image_list(path("photos/train.txt"), "", 3);
  PackOptions options;
  options.root = path("photos");
  pack(*list, "packed", options);
  const auto packed = load_packed(path("packed"), 3);
  ASSERT_EQ(packed->size(), 3);
  EXPECT_EQ(packed->num_classes(), 5);
  EXPECT_TRUE(packed->class_names().empty());
  EXPECT_EQ(class_list(*packed), class_list(*list));
  EXPECT_EQ(packed->label(0), 4);
  EXPECT_EQ(packed->index().samples[2].path, "fox/2.jpg");
  Image a, b;
  for (int64_t i = 0; i < 3; ++i) {
    list->read_sample(i, a);
    packed->read_sample(i, b);
    EXPECT_EQ(a.pixels, b.pixels) << i;
  }
}

TEST_F(Packed, MaxSideReencodesOnlyLargerImages) {
  fs::create_directories(dir_ / "src/a");
  write_image_file(path("src/a/big.png"), smooth_image(3, 60, 90, 1), ImageFormat::png);
  write_image_file(path("src/a/gray.jpg"), smooth_image(1, 100, 20, 2), ImageFormat::jpeg, 95);
  write_image_file(path("src/a/small.png"), smooth_image(3, 30, 40, 3), ImageFormat::png);
  const auto folder = load_image_folder(path("src"), 3);
  PackOptions options;
  options.max_side = 45;
  options.quality = 95;
  const PackSummary summary = pack(*folder, "packed", options);
  EXPECT_EQ(summary.reencoded, 2);
  const auto packed = load_packed(path("packed"), 3);
  const std::vector<PackedSample>& samples = packed->index().samples;
  // big: 60 x 90 -> 30 x 45; gray: 100 x 20 -> 45 x 9, kept gray; small: kept as it is.
  EXPECT_EQ(samples[0].height, 30u);
  EXPECT_EQ(samples[0].width, 45u);
  EXPECT_EQ(samples[1].height, 45u);
  EXPECT_EQ(samples[1].width, 9u);
  std::vector<uint8_t> bytes;
  packed->read_bytes(2, bytes);
  EXPECT_EQ(std::string(bytes.begin(), bytes.end()), read_file(path("src/a/small.png")));
  Image image, resized, gray;
  packed->read_sample(0, image);
  EXPECT_EQ(image.shape, (Shape{3, 30, 45}));
  Image original;
  folder->read_sample(0, original);
  resize(original, 30, 45, resized);
  double error = 0;
  for (size_t i = 0; i < image.pixels.size(); ++i) {
    error += std::abs(image.pixels[i] - resized.pixels[i]);
  }
  EXPECT_LT(error / double(image.pixels.size()), 2.0);  // JPEG at quality 95 of a smooth image
  packed->read_bytes(1, bytes);
  decode_image(bytes.data(), bytes.size(), 3, "gray", gray);
  const int64_t plane = 45 * 9;
  EXPECT_TRUE(
      std::equal(gray.pixels.begin(), gray.pixels.begin() + plane, gray.pixels.begin() + plane));
}

TEST_F(Packed, UnreadableFilesAreNamedOrSkipped) {
  photo_folder("photos");
  write_file("photos/dog/broken.jpg", std::string("\xFF\xD8\xFF\xE0 truncated", 15));
  write_file("photos/fox/text.png", "not a png");
  const auto folder = load_image_folder(path("photos"), 3);
  EXPECT_CONTAINS(error_of([&] { pack(*folder, "packed"); }), "broken.jpg");
  EXPECT_FALSE(fs::exists(path("packed")));
  for (const fs::directory_entry& entry : fs::directory_iterator(dir_)) {
    EXPECT_EQ(entry.path().filename().string().find(".tmp-"), std::string::npos)
        << "left behind: " << entry.path();
  }
  PackOptions options;
  options.skip_bad = true;
  const PackSummary summary = pack(*folder, "packed", options);
  EXPECT_EQ(summary.samples, 11);
  ASSERT_EQ(summary.skipped.size(), 2u);
  EXPECT_CONTAINS(summary.skipped[0], "broken.jpg");
  EXPECT_CONTAINS(summary.skipped[1], "text.png");
  EXPECT_EQ(load_packed(path("packed"), 3)->size(), 11);
}

TEST_F(Packed, AnyNumberOfWorkersWritesTheSameFiles) {
  photo_folder("photos");
  write_file("photos/dog/broken.jpg", "not an image");
  const auto folder = load_image_folder(path("photos"), 3);
  PackOptions options;
  options.skip_bad = true;
  options.max_side = 44;  // some re-encoded too
  options.shard_bytes = 5000;
  const PackSummary one = pack(*folder, "one", options);
  options.workers = 3;
  const PackSummary three = pack(*folder, "three", options);
  EXPECT_EQ(one.skipped, three.skipped);
  EXPECT_EQ(one.reencoded, three.reencoded);
  EXPECT_GT(one.reencoded, 0);
  ASSERT_EQ(one.shards, three.shards);
  EXPECT_EQ(read_file(path("one/index.crema")), read_file(path("three/index.crema")));
  for (size_t s = 0; s < one.shards; ++s) {
    EXPECT_EQ(read_file(path("one/" + shard_file_name(s))),
              read_file(path("three/" + shard_file_name(s))))
        << s;
  }
}

TEST_F(Packed, ReplacesAnEarlierPackButNoOtherFolder) {
  const auto folder = load_image_folder(photo_folder("photos"), 3);
  pack(*folder, "packed");
  PackOptions options;
  options.shard_bytes = 1000;
  pack(*folder, "packed", options);
  EXPECT_GT(load_packed(path("packed"), 3)->index().shard_sizes.size(), 5u);
  write_file("other/notes.txt", "mine");
  EXPECT_CONTAINS(error_of([&] { pack(*folder, "other"); }), "is not a packed dataset");
  EXPECT_EQ(read_file(path("other/notes.txt")), "mine");
}

// A dataset of 1 x 1 x 1 samples labelled i % 2 that records the hints and reductions it gets.
class RecordingDataset : public Dataset {
 public:
  int64_t size() const override { return 10; }
  const Shape& sample_shape() const override { return shape_; }
  int64_t num_classes() const override { return 2; }
  void read_sample(int64_t index, Image& out) const override { out.reset(shape_); }
  void read_sample_reduced(int64_t index, Image& out, const DecodePlanner& plan) const override {
    reductions.push_back(plan ? plan({64, 64}).reduction : 0);
    read_sample(index, out);
  }
  void will_read(const int64_t* indices, int64_t count) const override {
    hints.emplace_back(indices, indices + count);
  }
  int64_t label(int64_t index) const override { return index % 2; }
  std::string description() const override { return "recording"; }

  mutable std::vector<std::vector<int64_t>> hints;
  mutable std::vector<int> reductions;

 private:
  Shape shape_ = {1, 1, 1};
};

TEST(DatasetHints, TheLoaderHintsEachBatchAndClassSubsetsPassHintsAndReductionsOn) {
  auto recording = std::make_shared<RecordingDataset>();
  DataLoaderOptions options;
  options.batch_size = 3;
  options.shuffle = true;
  options.num_workers = 0;
  DataLoader loader(recording, options);
  const std::vector<int64_t> order = epoch_order(10, options.seed, 0);
  loader.next();
  loader.next();
  ASSERT_EQ(recording->hints.size(), 2u);
  EXPECT_EQ(recording->hints[0], std::vector<int64_t>(order.begin(), order.begin() + 3));
  EXPECT_EQ(recording->hints[1], std::vector<int64_t>(order.begin() + 3, order.begin() + 6));

  recording->hints.clear();
  const auto odd = select_classes(recording, {1});  // samples 1, 3, 5, 7, 9
  const int64_t wanted[] = {0, 2, 4};
  odd->will_read(wanted, 3);
  ASSERT_EQ(recording->hints.size(), 1u);
  EXPECT_EQ(recording->hints[0], (std::vector<int64_t>{1, 5, 9}));
  Image image;
  odd->read_sample_reduced(1, image, [](Size2 full) {
    DecodePlan plan;
    plan.reduction = int(full.height / 16);
    return plan;
  });
  EXPECT_EQ(recording->reductions, std::vector<int>{4});
}

class PackedCorruption : public Packed {
 protected:
  void SetUp() override {
    Packed::SetUp();
    const auto folder = load_image_folder(photo_folder("photos"), 3);
    PackOptions options;
    options.root = path("photos");
    options.shard_bytes = 6000;
    pack(*folder, "packed", options);
    index_ = read_pack_index(path("packed"));
  }
  std::string index_path() const { return path("packed/index.crema"); }
  std::string shard(size_t s) const { return path("packed/" + shard_file_name(s)); }
  // The error of reading every sample.
  std::string read_all_error() const {
    return error_of([&] {
      const auto packed = load_packed(path("packed"), 3);
      Image image;
      for (int64_t i = 0; i < packed->size(); ++i) packed->read_sample(i, image);
    });
  }
  PackedIndex index_;
};

TEST_F(PackedCorruption, FlippedByteInAShardNamesTheShardAndSample) {
  const PackedSample& third = index_.samples[2];
  std::string bytes = read_file(shard(third.shard));
  bytes[size_t(third.offset + third.length / 2)] ^= 0x10;
  write_file("packed/" + shard_file_name(third.shard), bytes);
  const std::string error = read_all_error();
  EXPECT_CONTAINS(error, shard(third.shard));
  EXPECT_CONTAINS(error, "sample 2 ('" + third.path + "')");
  EXPECT_CONTAINS(error, "CRC-32");
  // skip_bad: the loader takes the next sample in its place and reports it.
  std::vector<std::string> reports;
  DataLoaderOptions options;
  options.batch_size = 11;
  options.skip_bad = true;
  options.num_workers = 0;
  options.transforms = {make_transform({"resize", {8, 8}})};
  options.report = [&](const std::string& line) { reports.push_back(line); };
  DataLoader loader(load_packed(path("packed"), 3), options);
  loader.next();
  EXPECT_EQ(loader.skipped_samples(), 1);
  ASSERT_EQ(reports.size(), 1u);
  EXPECT_CONTAINS(reports[0], "CRC-32");
}

TEST_F(PackedCorruption, TruncatedShardNamesTheSamplesPastItsEnd) {
  const size_t last = index_.shard_sizes.size() - 1;
  const std::string bytes = read_file(shard(last));
  write_file("packed/" + shard_file_name(last), bytes.substr(0, bytes.size() / 2));
  const std::string error = read_all_error();
  EXPECT_CONTAINS(error, shard(last));
  EXPECT_CONTAINS(error, "the shard is truncated");
}

TEST_F(PackedCorruption, MissingShardIsAnErrorWhenOpened) {
  ASSERT_GE(index_.shard_sizes.size(), 2u);
  fs::remove(shard(1));
  EXPECT_CONTAINS(error_of([&] { load_packed(path("packed"), 3); }), shard(1));
}

TEST_F(PackedCorruption, IndexErrorsNameTheIndexAndWhatIsWrong) {
  const std::string good = read_file(index_path());
  const auto expect_error = [&](const std::string& bytes, const std::string& needle) {
    write_file("packed/index.crema", bytes);
    const std::string error = error_of([&] { load_packed(path("packed"), 3); });
    EXPECT_CONTAINS(error, index_path());
    EXPECT_CONTAINS(error, needle);
  };
  expect_error("GIF89a" + good.substr(6), "not a packed dataset index");
  expect_error(good.substr(0, good.size() / 2), "truncated");
  expect_error(good + "x", "1 bytes after the end");
  std::string flipped = good;
  flipped[good.size() - 8] ^= 0x01;  // inside the last record's path, "fox/8.jpg"
  expect_error(flipped, "CRC-32");
  std::string huge = good;
  huge[16] = huge[17] = huge[18] = huge[19] = '\x7F';  // the sample count's low bytes
  expect_error(huge, "the header promises");
  // Structural errors under a valid CRC: written through the encoder.
  PackedIndex bad = index_;
  bad.samples[3].offset = bad.shard_sizes[bad.samples[3].shard] - 2;
  expect_error(encode_pack_index(bad), "sample 3 ('" + bad.samples[3].path + "') lies at bytes");
  bad = index_;
  bad.samples[5].label = 3;
  expect_error(encode_pack_index(bad), "outside the 3 classes");
  bad = index_;
  bad.samples[0].shard = 99;
  expect_error(encode_pack_index(bad), "names shard 99");
  EXPECT_CONTAINS(error_of([&] { load_packed(path("nothing_here"), 3); }), "is not a folder");
}

}  // namespace
}  // namespace crema::data
