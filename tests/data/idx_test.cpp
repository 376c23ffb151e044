#include "data/idx.h"

#include <gtest/gtest.h>
#include <unistd.h>
#include <zlib.h>

#include <cmath>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "core/error.h"
#include "tests/support/error_text.h"

namespace crema::data {
namespace {

namespace fs = std::filesystem;
using Bytes = std::vector<uint8_t>;
using crema::testing::error_of;

// An IDX file's bytes: magic 0x0000TTDD, big-endian extents, then `values`.
Bytes idx_bytes(int type, const Shape& dims, const Bytes& values) {
  Bytes bytes = {0, 0, uint8_t(type), uint8_t(dims.size())};
  for (int64_t extent : dims) {
    for (int shift = 24; shift >= 0; shift -= 8)
      bytes.push_back(uint8_t(uint64_t(extent) >> shift));
  }
  bytes.insert(bytes.end(), values.begin(), values.end());
  return bytes;
}

// Distinct, non-zero values that depend on the position, so a misplaced byte shows.
Bytes pattern(size_t count, int salt) {
  Bytes values(count);
  for (size_t i = 0; i < count; ++i) values[i] = uint8_t((i * 37 + size_t(salt) * 11 + 1) % 251);
  return values;
}

// Writes files into a directory of their own, removed at the end of the test.
class IdxFiles : public ::testing::Test {
 protected:
  void SetUp() override {
    const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
    dir_ = fs::path(::testing::TempDir()) /
           ("crema_idx_" + std::string(info->name()) + "_" + std::to_string(getpid()));
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }

  std::string write(const std::string& name, const Bytes& bytes) {
    const std::string path = (dir_ / name).string();
    if (name.size() > 3 && name.substr(name.size() - 3) == ".gz") {
      gzFile file = gzopen(path.c_str(), "wb");
      EXPECT_NE(file, nullptr);
      EXPECT_EQ(gzwrite(file, bytes.data(), unsigned(bytes.size())), int(bytes.size()));
      gzclose(file);
    } else {
      std::ofstream(path, std::ios::binary)
          .write(reinterpret_cast<const char*>(bytes.data()), std::streamsize(bytes.size()));
    }
    return path;
  }

  fs::path dir_;
};

TEST_F(IdxFiles, ReadsPlainAndGzip) {
  const Bytes values = pattern(5 * 3 * 2, 1);
  for (const std::string name : {"images.idx", "images.idx.gz"}) {
    const IdxArray array = read_idx(write(name, idx_bytes(0x08, {5, 3, 2}, values)));
    EXPECT_EQ(array.dims, (Shape{5, 3, 2})) << name;
    EXPECT_EQ(array.values, values) << name;
  }
}

TEST_F(IdxFiles, ReadsLargeExtentsBigEndian) {
  // 300 = 0x012C tests both bytes of an extent; one sample of 1 x 300.
  const Bytes values = pattern(300, 2);
  const IdxArray array = read_idx(write("wide.gz", idx_bytes(0x08, {1, 1, 300}, values)));
  EXPECT_EQ(array.dims, (Shape{1, 1, 300}));
  EXPECT_EQ(array.values, values);
}

TEST_F(IdxFiles, LoadDatasetKeepsSamplesAndLabels) {
  const Bytes pixels = pattern(7 * 3 * 2, 3);
  const Bytes labels = {4, 0, 9, 2, 2, 7, 1};
  auto dataset = load_idx_dataset(write("img.gz", idx_bytes(0x08, {7, 3, 2}, pixels)),
                                  write("lab", idx_bytes(0x08, {7}, labels)));
  EXPECT_EQ(dataset->size(), 7);
  EXPECT_EQ(dataset->sample_shape(), (Shape{1, 3, 2}));
  EXPECT_EQ(dataset->sample_numel(), 6);
  EXPECT_EQ(dataset->num_classes(), 10);
  EXPECT_CONTAINS(dataset->description(), "img.gz");
  for (int64_t i = 0; i < 7; ++i) {
    Image sample;
    sample.pixels.assign(6, std::nanf(""));
    dataset->read_sample(i, sample);
    ASSERT_EQ(sample.shape, (Shape{1, 3, 2}));
    for (int j = 0; j < 6; ++j)
      EXPECT_EQ(sample.pixels[size_t(j)], float(pixels[size_t(i * 6 + j)]));
    EXPECT_EQ(dataset->label(i), labels[size_t(i)]);
  }
}

TEST_F(IdxFiles, LoadFourDimImagesAsChannels) {
  auto dataset = load_idx_dataset(write("img", idx_bytes(0x08, {2, 3, 2, 2}, pattern(24, 4))),
                                  write("lab", idx_bytes(0x08, {2}, {1, 0})));
  EXPECT_EQ(dataset->sample_shape(), (Shape{3, 2, 2}));
}

TEST_F(IdxFiles, MissingFileNamesPath) {
  const std::string path = (dir_ / "absent-images.gz").string();
  const std::string message = error_of([&] { read_idx(path); });
  EXPECT_CONTAINS(message, path);
  EXPECT_CONTAINS(message, "No such file");
}

TEST_F(IdxFiles, WrongMagicShowsFoundAndExpected) {
  const std::string text = write("notes.txt", {'h', 'e', 'l', 'l', 'o', '!', '\n'});
  std::string message = error_of([&] { read_idx(text); });
  EXPECT_CONTAINS(message, text);
  EXPECT_CONTAINS(message, "0x68656C6C");
  EXPECT_CONTAINS(message, "0x00000803");

  // A labels file passed as the images: a valid IDX magic, the wrong one.
  const std::string labels = write("labels", idx_bytes(0x08, {3}, {1, 2, 3}));
  message = error_of([&] { load_idx_dataset(labels, labels); });
  EXPECT_CONTAINS(message, labels);
  EXPECT_CONTAINS(message, "0x00000801");
  EXPECT_CONTAINS(message, "0x00000803");
}

TEST_F(IdxFiles, RejectsOtherElementTypes) {
  const std::string path = write("floats.gz", idx_bytes(0x0D, {1, 1, 1}, {0, 0, 128, 63}));
  const std::string message = error_of([&] { read_idx(path); });
  EXPECT_CONTAINS(message, path);
  EXPECT_CONTAINS(message, "float32");
  EXPECT_CONTAINS(message, "0x00000D03");
  EXPECT_CONTAINS(message, "uint8");
}

TEST_F(IdxFiles, TruncatedDataSaysBytesExpectedAndPresent) {
  // Header 4 + 3 * 4 = 16 bytes; [4, 3, 3] needs 36 data bytes; 20 are there.
  Bytes bytes = idx_bytes(0x08, {4, 3, 3}, pattern(20, 5));
  for (const std::string name : {"short", "short.gz"}) {
    const std::string path = write(name, bytes);
    const std::string message = error_of([&] { read_idx(path); });
    EXPECT_CONTAINS(message, path);
    EXPECT_CONTAINS(message, "truncated");
    EXPECT_CONTAINS(message, "52 bytes, 36 present");
  }
  bytes.resize(9);  // inside the extents
  const std::string path = write("header", bytes);
  EXPECT_CONTAINS(error_of([&] { read_idx(path); }), "the header needs 16 bytes, 9 present");
}

// A header promising far more than the file holds is refused before the buffer is allocated:
// 2^39 bytes in a plain file of 20 bytes, and in a gzip file whose size bounds what it inflates to.
TEST_F(IdxFiles, HeaderLargerThanTheFileIsRefusedBeforeAllocating) {
  const Bytes bytes = idx_bytes(0x08, {1 << 19, 1 << 10, 1 << 10}, pattern(4, 7));
  const std::string plain = write("huge", bytes);
  EXPECT_EQ(error_of([&] { read_idx(plain); }),
            "IDX file '" + plain + "' is truncated: its header [524288, 1024, 1024] needs " +
                std::to_string((uint64_t(1) << 39) + 16) + " bytes, 20 present");
  const std::string gz = write("huge.gz", bytes);
  const std::string message = error_of([&] { read_idx(gz); });
  EXPECT_CONTAINS(message, "IDX file '" + gz + "' is truncated or its header is wrong");
  EXPECT_CONTAINS(message, "gzip bytes can inflate to (at most 1032 x)");
}

TEST_F(IdxFiles, NonRegularFilesAreRefused) {
  EXPECT_EQ(error_of([&] { read_idx("/dev/zero"); }),
            "IDX file '/dev/zero' is a character device, not a regular file");
  EXPECT_EQ(error_of([&] { read_idx(dir_.string()); }),
            "IDX file '" + dir_.string() + "' is a directory, not a regular file");
}

TEST_F(IdxFiles, CutGzipStreamIsAnError) {
  const std::string whole = write("whole.gz", idx_bytes(0x08, {50, 4, 4}, pattern(800, 6)));
  std::ifstream in(whole, std::ios::binary);
  Bytes compressed((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  compressed.resize(compressed.size() / 2);
  const std::string cut = (dir_ / "cut.gz").string();
  std::ofstream(cut, std::ios::binary)
      .write(reinterpret_cast<const char*>(compressed.data()), std::streamsize(compressed.size()));
  const std::string message = error_of([&] { read_idx(cut); });
  EXPECT_CONTAINS(message, cut);
  EXPECT_CONTAINS(message, "truncated");
}

TEST_F(IdxFiles, TrailingBytesAreAnError) {
  Bytes bytes = idx_bytes(0x08, {2}, {1, 2});
  bytes.push_back(3);
  const std::string path = write("long", bytes);
  const std::string message = error_of([&] { read_idx(path); });
  EXPECT_CONTAINS(message, path);
  EXPECT_CONTAINS(message, "1 bytes after");
}

TEST_F(IdxFiles, CountMismatchNamesBothFiles) {
  const std::string images = write("img.gz", idx_bytes(0x08, {5, 2, 2}, pattern(20, 7)));
  const std::string labels = write("lab.gz", idx_bytes(0x08, {4}, {1, 2, 3, 4}));
  const std::string message = error_of([&] { load_idx_dataset(images, labels); });
  EXPECT_CONTAINS(message, images);
  EXPECT_CONTAINS(message, labels);
  EXPECT_CONTAINS(message, "5 samples");
  EXPECT_CONTAINS(message, "hold 4");
}

TEST(IdxFashionMnist, LoadsWhenPresent) {
  const std::string dir = "/usr/share/datasets/fashion-mnist/";
  if (!fs::exists(dir + "train-images-idx3-ubyte.gz"))
    GTEST_SKIP() << "no Fashion-MNIST in " << dir;
  // Sizes, first labels and the first image's pixel sum, as Python's gzip module reads them.
  struct Expected {
    std::string split;
    int64_t size;
    int64_t first_label;
    double first_sum;
  };
  for (const Expected& set :
       {Expected{"train", 60000, 9, 76247.0}, Expected{"t10k", 10000, 9, 33456.0}}) {
    auto dataset = load_idx_dataset(dir + set.split + "-images-idx3-ubyte.gz",
                                    dir + set.split + "-labels-idx1-ubyte.gz");
    EXPECT_EQ(dataset->size(), set.size);
    EXPECT_EQ(dataset->sample_shape(), (Shape{1, 28, 28}));
    EXPECT_EQ(dataset->num_classes(), 10);
    EXPECT_EQ(dataset->label(0), set.first_label);
    Image sample;
    dataset->read_sample(0, sample);
    double sum = 0;
    for (float v : sample.pixels) sum += v;
    EXPECT_EQ(sum, set.first_sum);
  }
}

}  // namespace
}  // namespace crema::data
