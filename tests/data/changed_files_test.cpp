// Dataset files that change on disk while a run reads them. Image folders and list files are
// read when each batch is made: a file that vanished, was cut short or now holds an image of
// another size is an error naming its path (with its list line), or with skip_bad is skipped and
// counted. IDX (and CIFAR) files are read whole when the dataset is loaded: later changes to the
// files do not reach the run.
#include <gtest/gtest.h>

#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "data/idx.h"
#include "data/image_files.h"
#include "data/loader.h"
#include "tests/data/data_test_util.h"

namespace crema::data {
namespace {

namespace fs = std::filesystem;
using testing::DataFiles;
using testing::error_of;
using testing::pattern_image;

class ChangedFiles : public DataFiles {
 protected:
  std::string png(const std::string& relative, int salt, int64_t height = 4) {
    fs::create_directories((dir_ / relative).parent_path());
    write_image_file(path(relative), pattern_image(1, height, 3, salt), ImageFormat::png);
    return path(relative);
  }
  // Six 4 x 3 images in two classes, and a loader that reads them in one batch per epoch.
  std::unique_ptr<DataLoader> folder_loader(const std::string& folder, bool skip_bad) {
    for (int i = 0; i < 6; ++i) {
      png(folder + "/c" + std::to_string(i % 2) + "/" + std::to_string(i) + ".png", i);
    }
    DataLoaderOptions options;
    options.batch_size = 6;
    options.num_workers = 0;
    options.skip_bad = skip_bad;
    options.report = [this](const std::string& line) { reports_.push_back(line); };
    auto loader = std::make_unique<DataLoader>(load_image_folder(path(folder), 1), options);
    loader->next();  // epoch 0 reads every file as it was
    return loader;
  }
  // The changes: a file removed, one cut to half its size, one replaced by a 7 x 3 image.
  std::string vanish(const std::string& folder) {
    fs::remove(path(folder + "/c0/2.png"));
    return path(folder + "/c0/2.png");
  }
  std::string cut(const std::string& folder) {
    const std::string file = path(folder + "/c1/3.png");
    fs::resize_file(file, fs::file_size(file) / 2);
    return file;
  }
  std::string resize(const std::string& folder) { return png(folder + "/c1/5.png", 5, 7); }

  std::vector<std::string> reports_;
};

TEST_F(ChangedFiles, AnImageFileChangedDuringTrainingIsNamed) {
  auto vanished = folder_loader("a", false);
  const std::string gone = vanish("a");
  std::string message = error_of([&] { vanished->next(); });
  EXPECT_CONTAINS(message, "epoch 1 batch 0");
  EXPECT_CONTAINS(message, gone);
  EXPECT_CONTAINS(message, "No such file or directory");

  auto truncated = folder_loader("b", false);
  const std::string short_file = cut("b");
  EXPECT_CONTAINS(error_of([&] { truncated->next(); }), short_file);

  auto resized = folder_loader("c", false);
  const std::string larger = resize("c");
  message = error_of([&] { resized->next(); });
  EXPECT_CONTAINS(message, larger);
  EXPECT_CONTAINS(message, "[1, 7, 3]");
}

TEST_F(ChangedFiles, WithSkipBadChangedImageFilesAreSkippedAndCounted) {
  auto loader = folder_loader("set", true);
  const std::string gone = vanish("set");
  cut("set");
  resize("set");
  const Batch batch = loader->next();  // epoch 1: the three bad files give way to good ones
  EXPECT_EQ(batch.data.dim(0), 6);
  EXPECT_EQ(loader->skipped_samples(), 3);
  ASSERT_EQ(reports_.size(), 1u);
  EXPECT_CONTAINS(reports_[0], "epoch 1: skipped 3 bad sample(s)");
  EXPECT_CONTAINS(reports_[0], gone);
}

TEST_F(ChangedFiles, IdxFilesAreReadWholeAtLoad) {
  std::string bytes = {0, 0, 8, 3, 0, 0, 0, 2, 0, 0, 0, 1, 0, 0, 0, 1, 7, 9};
  const std::string images = write_file("images.idx", bytes);
  const std::string labels = write_file("labels.idx", std::string{0, 0, 8, 1, 0, 0, 0, 2, 1, 0});
  std::shared_ptr<const Dataset> dataset = load_idx_dataset(images, labels);
  fs::remove(images);
  fs::remove(labels);
  DataLoaderOptions options;
  options.batch_size = 2;
  options.num_workers = 0;
  const Batch batch = DataLoader(dataset, options).next();
  EXPECT_EQ(batch.data.to_vector(), (std::vector<float>{7, 9}));
  EXPECT_EQ(batch.labels.to_vector(), (std::vector<float>{1, 0}));
}

}  // namespace
}  // namespace crema::data
