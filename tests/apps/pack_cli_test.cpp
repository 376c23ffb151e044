// `crema pack` as a user meets it, and the packed source in a config: a folder packed by the
// binary reads through `source: {format: packed, root: ...}` (a path relative to the config) to
// the folder's batches; bench-loader runs on it; bad input is one line and exit code 2.
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "apps/data_commands.h"
#include "apps/session.h"
#include "apps/training/data_config.h"
#include "data/image.h"
#include "tests/apps/app_test_util.h"
#include "tests/support/error_text.h"

namespace crema {
namespace {

struct Outcome {
  int exit_code = -1;
  std::string out, err;
};

std::string slurp(const std::string& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

class PackCli : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = testing::fresh_dir("pack_cli_" + testing::test_name());
    // photos/<class>/<i>.jpg|png, 9 files of two sizes.
    for (int i = 0; i < 9; ++i) {
      const std::string folder = dir_ + "/photos/" + (i % 2 ? "b" : "a");
      std::filesystem::create_directories(folder);
      data::Image image;
      image.reset({3, 20 + 4 * (i % 2), 24});
      for (size_t p = 0; p < image.pixels.size(); ++p) image.pixels[p] = float((p / 7 + i) % 200);
      const bool png = i % 3 == 0;
      data::write_image_file(folder + "/" + std::to_string(i) + (png ? ".png" : ".jpg"), image,
                             png ? data::ImageFormat::png : data::ImageFormat::jpeg, 90);
    }
  }
  Outcome run(const std::string& args) const {
    const std::string out_path = dir_ + "/stdout.txt", err_path = dir_ + "/stderr.txt";
    const std::string command =
        std::string(CREMA_BINARY_DIR) + "/bin/crema " + args + " > " + out_path + " 2> " + err_path;
    const int status = std::system(command.c_str());
    Outcome o;
    o.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
    o.out = slurp(out_path);
    o.err = slurp(err_path);
    return o;
  }
  void expect_error(const std::string& args, const std::string& needle) const {
    const Outcome o = run(args);
    EXPECT_EQ(o.exit_code, 2) << args << "\n" << o.err;
    EXPECT_CONTAINS(o.err, needle);
    EXPECT_EQ(o.err.find('\n'), o.err.size() - 1) << "not one line: " << o.err;
    EXPECT_EQ(o.err.rfind("crema: error: ", 0), 0u) << o.err;
  }
  // A config reading `source` for training, with a random crop and flip.
  std::string config(const std::string& name, const std::string& source) const {
    const std::string path = dir_ + "/" + name;
    testing::write_text(path, "seed: 3\ndata:\n  train:\n    source: " + source +
                                  "\n    batch_size: 4\n    workers: 2\n    transform: "
                                  "[{random_resized_crop: 12}, horizontal_flip]\n");
    return path;
  }
  std::string dir_;
};

TEST_F(PackCli, PackedFolderGivesTheFoldersBatchesThroughAConfig) {
  const Outcome o = run("pack " + dir_ + "/photos " + dir_ + "/packed --shard-size 2KB");
  ASSERT_EQ(o.exit_code, 0) << o.err;
  EXPECT_CONTAINS(o.out, "packed 9 images of image folder");
  const std::string folder = config("folder.yaml", "{format: image_folder, root: photos}");
  const std::string packed = config("packed.yaml", "{format: packed, root: packed}");
  const ConfigNode a = load_run_config(folder, {}), b = load_run_config(packed, {});
  const auto first = make_loader(a.at("data"), "train", 3);
  const auto second = make_loader(b.at("data"), "train", 3);
  EXPECT_CONTAINS(second->dataset().description(), "packed dataset");
  EXPECT_EQ(first->dataset().class_names(), second->dataset().class_names());
  for (int i = 0; i < 6; ++i) {  // three epochs of two batches
    const data::Batch x = first->next(), y = second->next();
    EXPECT_EQ(x.data.to_vector(), y.data.to_vector()) << i;
    EXPECT_EQ(x.labels.to_vector(), y.labels.to_vector()) << i;
  }
  const Outcome bench = run("bench-loader " + packed + " --workers 0,2 --batches 3");
  EXPECT_EQ(bench.exit_code, 0) << bench.err;
  EXPECT_CONTAINS(bench.out, "packed dataset");
}

TEST_F(PackCli, BadFilesAreNamedOrSkippedWithSkipBad) {
  testing::write_text(dir_ + "/photos/b/cut.jpg", std::string("\xFF\xD8\xFF\xDB", 4));
  expect_error("pack " + dir_ + "/photos " + dir_ + "/packed", "cut.jpg");
  EXPECT_FALSE(std::filesystem::exists(dir_ + "/packed"));
  const Outcome o = run("pack " + dir_ + "/photos " + dir_ + "/packed --skip-bad");
  EXPECT_EQ(o.exit_code, 0) << o.err;
  EXPECT_CONTAINS(o.out, "packed 9 images");
  EXPECT_CONTAINS(o.out, "skipped 1 file(s)");
  EXPECT_CONTAINS(o.out, "cut.jpg");
}

TEST_F(PackCli, UserErrorsExitWithTwo) {
  expect_error("pack " + dir_ + "/missing " + dir_ + "/packed", "neither an image folder");
  expect_error("pack " + dir_ + "/photos " + dir_ + "/packed --shard-size lots", "--shard-size");
  expect_error("pack " + dir_ + "/photos " + dir_ + "/packed --quality 0", "--quality");
  expect_error("pack " + dir_ + "/photos " + dir_ + "/photos/a", "is not a packed dataset");
  expect_error("pack " + dir_ + "/photos " + dir_ + "/packed --root x", "for a list file");
  expect_error("pack " + dir_ + "/photos", "out");
  testing::write_text(dir_ + "/list.txt", "photos/a/0.png 0\nphotos/b/1.jpg zebra\n");
  expect_error("pack " + dir_ + "/list.txt " + dir_ + "/packed", "list.txt:2");
  const std::string packed = config("packed.yaml", "{format: packed, root: nowhere}");
  expect_error("bench-loader " + packed, "nowhere");
}

}  // namespace
}  // namespace crema
