// Image folders and list files on small PNG and JPEG files written by crema's encoders, and
// select_classes.
#include "data/image_files.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "data/loader.h"
#include "tests/data/data_test_util.h"

namespace crema::data {
namespace {

namespace fs = std::filesystem;
using testing::DataFiles;
using testing::error_of;
using testing::pattern_image;

class ImageFolder : public DataFiles {
 protected:
  // Writes a PNG of pattern_image(channels, h, w, salt) to dir/relative.
  std::string png(const std::string& relative, int salt, int64_t channels = 1, int64_t height = 4,
                  int64_t width = 3) {
    fs::create_directories((dir_ / relative).parent_path());
    write_image_file(path(relative), pattern_image(channels, height, width, salt),
                     ImageFormat::png);
    return path(relative);
  }
};

TEST_F(ImageFolder, ClassesAndFilesInSortedOrder) {
  // Written out of order; "10" sorts before "9" (byte order, as torchvision's sorted()).
  png("root/b_cat/2.png", 1);
  png("root/b_cat/1.png", 2);
  png("root/9/x.png", 3);
  png("root/a_dog/deeper/z.png", 4);
  png("root/a_dog/m.PNG", 5);
  png("root/10/only.png", 6);
  write_file("root/a_dog/readme.txt", "not an image, ignored");
  png("root/.cache/hidden.png", 7);  // hidden folders are not classes
  png("root/b_cat/.hidden.png", 8);  // nor hidden files samples
  write_file("root/stray.png", "files directly under root are not samples");

  const auto dataset = load_image_folder(path("root"), 1);
  EXPECT_EQ(dataset->class_names(), (std::vector<std::string>{"10", "9", "a_dog", "b_cat"}));
  EXPECT_EQ(dataset->num_classes(), 4);
  EXPECT_EQ(class_names_text(*dataset), "10\n9\na_dog\nb_cat\n");
  EXPECT_EQ(dataset->sample_shape(), (Shape{1, 4, 3}));
  const std::vector<int> salts = {6, 3, 4, 5, 2, 1};  // 10/only, 9/x, a_dog/deeper/z, a_dog/m, 1, 2
  const std::vector<int64_t> labels = {0, 1, 2, 2, 3, 3};
  ASSERT_EQ(dataset->size(), 6);
  Image image;
  for (int64_t i = 0; i < 6; ++i) {
    dataset->read_sample(i, image);
    EXPECT_EQ(image.pixels, pattern_image(1, 4, 3, salts[size_t(i)]).pixels) << i;
    EXPECT_EQ(dataset->label(i), labels[size_t(i)]) << i;
  }
  EXPECT_CONTAINS(dataset->sample_name(2), "a_dog/deeper/z.png");
}

TEST_F(ImageFolder, JpegAndRgbThroughTheLoaderWithAPartialLastBatch) {
  // Seven 3 x 8 x 8 images in two classes, as JPEG; batches of 3: 3, 3, 1.
  Image smooth;
  smooth.reset({3, 8, 8});
  for (size_t i = 0; i < smooth.pixels.size(); ++i)
    smooth.pixels[i] = float(60 + (i % 64) + i / 64 * 40);
  for (int i = 0; i < 7; ++i) {
    fs::create_directories(dir_ / "jpg" / (i < 4 ? "a" : "b"));
    write_image_file(path("jpg/" + std::string(i < 4 ? "a/" : "b/") + std::to_string(i) + ".jpg"),
                     smooth, ImageFormat::jpeg, 95);
  }
  std::shared_ptr<const Dataset> dataset = load_image_folder(path("jpg"), 3);
  DataLoaderOptions options;
  options.batch_size = 3;
  options.num_workers = 2;
  DataLoader loader(dataset, options);
  ASSERT_EQ(loader.batches_per_epoch(), 3);
  std::vector<float> labels;
  for (int64_t expected : {3, 3, 1}) {
    const Batch batch = loader.next();
    ASSERT_EQ(batch.data.shape(), (Shape{expected, 3, 8, 8}));
    const std::vector<float> values = batch.data.to_vector();
    for (size_t i = 0; i < values.size(); ++i) {
      EXPECT_NEAR(values[i], smooth.pixels[i % smooth.pixels.size()], 12.0f) << i;
    }
    for (float label : batch.labels.to_vector()) labels.push_back(label);
  }
  EXPECT_EQ(labels, (std::vector<float>{0, 0, 0, 0, 1, 1, 1}));
}

TEST_F(ImageFolder, BadFoldersNameWhatIsWrong) {
  EXPECT_CONTAINS(error_of([&] { load_image_folder(path("absent"), 1); }), "does not exist");
  write_file("plain", "a file");
  EXPECT_CONTAINS(error_of([&] { load_image_folder(path("plain"), 1); }), "is not a folder");
  png("flat/1.png", 1);
  EXPECT_CONTAINS(error_of([&] { load_image_folder(path("flat"), 1); }), "no class subfolders");
  png("holes/full/1.png", 1);
  write_file("holes/empty/notes.txt", "no images here");
  const std::string message = error_of([&] { load_image_folder(path("holes"), 1); });
  EXPECT_CONTAINS(message, path("holes/empty"));
  EXPECT_CONTAINS(message, "holds no image file");
  EXPECT_CONTAINS(message, "only 1 other file");
  png("good/a/1.png", 1);
  EXPECT_CONTAINS(error_of([&] { load_image_folder(path("good"), 2); }), "channels is 2");
}

TEST_F(ImageFolder, CorruptImageIsNamedOrSkipped) {
  png("set/a/0.png", 1);
  png("set/a/1.png", 2);
  const std::string bad = write_file("set/a/2.png", "\x89PNG\r\n\x1a\n but then nothing");
  png("set/b/3.png", 3);
  std::shared_ptr<const Dataset> dataset = load_image_folder(path("set"), 1);
  DataLoaderOptions options;
  options.batch_size = 4;
  const std::string message = error_of([&] { DataLoader(dataset, options).next(); });
  EXPECT_CONTAINS(message, bad);
  EXPECT_CONTAINS(message, "epoch 0 batch 0");

  options.skip_bad = true;
  std::vector<std::string> reports;
  options.report = [&](const std::string& line) { reports.push_back(line); };
  DataLoader loader(dataset, options);
  const Batch batch = loader.next();  // 0, 1, then 3 in place of 2, then 3 itself
  EXPECT_EQ(batch.labels.to_vector(), (std::vector<float>{0, 0, 1, 1}));
  ASSERT_EQ(reports.size(), 1u);
  EXPECT_CONTAINS(reports[0], "skipped 1 bad sample");
  EXPECT_CONTAINS(reports[0], bad);
}

TEST_F(ImageFolder, DifferentSizesNeedAResize) {
  png("mixed/a/0.png", 1, 1, 4, 4);
  const std::string large = png("mixed/b/1.png", 2, 1, 6, 5);
  std::shared_ptr<const Dataset> dataset = load_image_folder(path("mixed"), 1);
  DataLoaderOptions options;
  options.batch_size = 2;
  const std::string message = error_of([&] { DataLoader(dataset, options).next(); });
  EXPECT_CONTAINS(message, large);
  EXPECT_CONTAINS(message, "[1, 6, 5]");
  EXPECT_CONTAINS(message, "resize");
  options.transforms.push_back(make_transform({"resize", {4.0f, 4.0f}}));
  EXPECT_EQ(DataLoader(dataset, options).next().data.shape(), (Shape{2, 1, 4, 4}));
}

using ImageList = ImageFolder;

TEST_F(ImageList, PathsAndLabelsInListOrder) {
  png("imgs/one.png", 1);
  png("imgs/with space.png", 2);
  const std::string absolute = png("elsewhere/abs.png", 3);
  const std::string list = write_file(
      "imgs/train.txt", "# path label\n\none.png 4\n  with space.png\t0  \n" + absolute + " 2\n");
  auto dataset = load_image_list(list, "", 1);  // relative to the list's folder
  ASSERT_EQ(dataset->size(), 3);
  EXPECT_EQ(dataset->num_classes(), 5);
  EXPECT_TRUE(dataset->class_names().empty());
  Image image;
  const std::vector<int> salts = {1, 2, 3};
  const std::vector<int64_t> labels = {4, 0, 2};
  for (int64_t i = 0; i < 3; ++i) {
    dataset->read_sample(i, image);
    EXPECT_EQ(image.pixels, pattern_image(1, 4, 3, salts[size_t(i)]).pixels) << i;
    EXPECT_EQ(dataset->label(i), labels[size_t(i)]);
  }
  EXPECT_CONTAINS(dataset->sample_name(1), "train.txt:4");
  // An explicit root, and a class count larger than the labels seen.
  const std::string flat = write_file("flat.txt", "imgs/one.png 1\n");
  auto rooted = load_image_list(flat, dir_.string(), 3, 7);
  EXPECT_EQ(rooted->num_classes(), 7);
  EXPECT_EQ(rooted->sample_shape(), (Shape{3, 4, 3}));
}

TEST_F(ImageList, BadLinesNameFileAndLine) {
  png("one.png", 1);
  struct Case {
    std::string text, expected;
  };
  for (const Case& c :
       {Case{"one.png 0\none.png\n", "list.txt:2: expected '<path> <label>'"},
        Case{"one.png 0\n\none.png cat\n", "list.txt:3: the label 'cat'"},
        Case{"one.png -1\n", "list.txt:1: the label '-1'"},
        Case{"one.png 1.5\n", "list.txt:1: the label '1.5'"},
        Case{"one.png 0\none.png 3\n", "list.txt:2: the label 3 is outside the 3 classes"},
        Case{"# nothing\n\n", "names no image"}}) {
    const std::string list = write_file("list.txt", c.text);
    EXPECT_CONTAINS(error_of([&] { load_image_list(list, "", 1, 3); }), c.expected);
  }
  EXPECT_CONTAINS(error_of([&] { load_image_list(path("absent.txt"), "", 1); }), "absent.txt");
}

TEST_F(ImageList, MissingFileIsNamedWithItsLine) {
  png("one.png", 1);
  const std::string list = write_file("list.txt", "one.png 0\ngone.png 1\n");
  auto dataset = load_image_list(list, "", 1);
  Image image;
  const std::string message = error_of([&] { dataset->read_sample(1, image); });
  EXPECT_CONTAINS(message, "list.txt:2");
  EXPECT_CONTAINS(message, path("gone.png"));
}

TEST(SelectClasses, KeepsAndRenumbers) {
  // Six 1 x 1 x 2 samples with labels 0 1 2 3 1 3 and pixels (10 i, 10 i + 1).
  std::vector<uint8_t> pixels;
  for (uint8_t i = 0; i < 6; ++i) {
    pixels.push_back(uint8_t(10 * i));
    pixels.push_back(uint8_t(10 * i + 1));
  }
  auto base = std::make_shared<InMemoryDataset>("toy", Shape{1, 1, 2}, pixels,
                                                std::vector<int32_t>{0, 1, 2, 3, 1, 3},
                                                std::vector<std::string>{"a", "b", "c", "d"});
  auto subset = select_classes(base, {3, 1});
  ASSERT_EQ(subset->size(), 4);
  EXPECT_EQ(subset->num_classes(), 2);
  EXPECT_EQ(subset->class_names(), (std::vector<std::string>{"d", "b"}));
  const std::vector<int64_t> kept = {1, 3, 4, 5}, labels = {1, 0, 1, 0};
  Image image;
  for (int64_t i = 0; i < 4; ++i) {
    subset->read_sample(i, image);
    EXPECT_EQ(image.pixels,
              (std::vector<float>{float(10 * kept[size_t(i)]), float(10 * kept[size_t(i)] + 1)}));
    EXPECT_EQ(subset->label(i), labels[size_t(i)]);
  }
  EXPECT_CONTAINS(error_of([&] { select_classes(base, {}); }), "empty");
  EXPECT_CONTAINS(error_of([&] { select_classes(base, {1, 1}); }), "listed twice");
  EXPECT_CONTAINS(error_of([&] { select_classes(base, {4}); }), "4 is not a class");
  auto no_twos = std::make_shared<InMemoryDataset>("toy", Shape{1}, std::vector<uint8_t>{1, 2},
                                                   std::vector<int32_t>{0, 3});
  EXPECT_CONTAINS(error_of([&] { select_classes(no_twos, {2}); }), "class 2 has no sample");
}

}  // namespace
}  // namespace crema::data
