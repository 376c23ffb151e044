#include "data/cifar.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "tests/data/data_test_util.h"

namespace crema::data {
namespace {

using testing::error_of;

// One record: the label bytes, then 3072 pixel bytes that depend on the record and position.
std::string record(const std::vector<uint8_t>& label_bytes, int salt) {
  std::string bytes(label_bytes.begin(), label_bytes.end());
  for (int i = 0; i < 3072; ++i) bytes.push_back(char((i * 7 + salt * 31 + 3) % 256));
  return bytes;
}

using CifarFiles = testing::DataFiles;

TEST_F(CifarFiles, Cifar10RecordsAcrossFiles) {
  const std::string a =
      write_file("data_batch_1.bin", record({3}, 0) + record({9}, 1) + record({0}, 2));
  const std::string b = write_file("data_batch_2.bin", record({5}, 3) + record({3}, 4));
  auto dataset = load_cifar({a, b}, CifarVariant::cifar10);
  ASSERT_EQ(dataset->size(), 5);
  EXPECT_EQ(dataset->sample_shape(), (Shape{3, 32, 32}));
  EXPECT_EQ(dataset->num_classes(), 10);
  EXPECT_EQ(dataset->class_names()[9], "9");  // no batches.meta.txt beside the files
  const std::vector<int64_t> labels = {3, 9, 0, 5, 3};
  Image image;
  for (int64_t r = 0; r < 5; ++r) {
    dataset->read_sample(r, image);
    ASSERT_EQ(image.shape, (Shape{3, 32, 32}));
    EXPECT_EQ(dataset->label(r), labels[size_t(r)]);
    // The planar R, G, B bytes are crema's C x H x W as they are.
    for (int i = 0; i < 3072; i += 97) {
      EXPECT_EQ(image.pixels[size_t(i)], float((i * 7 + int(r) * 31 + 3) % 256)) << r << " " << i;
    }
  }
}

TEST_F(CifarFiles, Cifar100FineOrCoarseAndClassNames) {
  const std::string file = write_file("train.bin", record({4, 73}, 0) + record({19, 99}, 1));
  std::string names;
  for (int c = 0; c < 100; ++c) names += "fine" + std::to_string(c) + "\n";
  write_file("fine_label_names.txt", names);
  auto fine = load_cifar({file}, CifarVariant::cifar100_fine);
  EXPECT_EQ(fine->num_classes(), 100);
  EXPECT_EQ(fine->label(0), 73);
  EXPECT_EQ(fine->label(1), 99);
  EXPECT_EQ(fine->class_names()[73], "fine73");
  auto coarse = load_cifar({file}, CifarVariant::cifar100_coarse);
  EXPECT_EQ(coarse->num_classes(), 20);
  EXPECT_EQ(coarse->label(1), 19);
  Image image;
  coarse->read_sample(1, image);
  EXPECT_EQ(image.pixels[5], float((5 * 7 + 31 + 3) % 256));
}

TEST_F(CifarFiles, BadFilesNameTheFile) {
  const std::string cut = write_file("cut.bin", record({1}, 0) + record({2}, 1).substr(0, 100));
  std::string message = error_of([&] { load_cifar({cut}, CifarVariant::cifar10); });
  EXPECT_CONTAINS(message, cut);
  EXPECT_CONTAINS(message, "3173 bytes, not a whole number of 3073-byte records");
  const std::string label = write_file("label.bin", record({2}, 0) + record({10}, 1));
  message = error_of([&] { load_cifar({label}, CifarVariant::cifar10); });
  EXPECT_CONTAINS(message, label);
  EXPECT_CONTAINS(message, "record 1 has the label 10");
  const std::string coarse = write_file("coarse.bin", record({20, 5}, 0));
  EXPECT_CONTAINS(error_of([&] { load_cifar({coarse}, CifarVariant::cifar100_coarse); }),
                  "label 20, outside the 20 classes");
  EXPECT_CONTAINS(error_of([&] { load_cifar({path("absent.bin")}, CifarVariant::cifar10); }),
                  "absent.bin");
  EXPECT_CONTAINS(
      error_of([&] { load_cifar({write_file("empty.bin", "")}, CifarVariant::cifar10); }),
      "empty.bin");
}

}  // namespace
}  // namespace crema::data
