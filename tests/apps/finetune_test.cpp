// The fine-tuning path on image folders: the run's class list (classes.txt, state.json, a test
// folder labelled by it), the check of the head against the data's classes, parameter groups in
// the training header and `crema summary`, and `crema predict`.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "apps/commands.h"
#include "apps/session.h"
#include "apps/training/data_config.h"
#include "core/config.h"
#include "core/random.h"
#include "data/image.h"
#include "tests/apps/app_test_util.h"
#include "tests/support/error_text.h"

namespace crema {
namespace {

using testing::error_of;

std::string read_text(const std::string& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

// A grey 8 x 8 PNG with a bright 3 x 3 block whose place tells the class (0: top left, 1: top
// right, 2: bottom left, 3: bottom right), over noise drawn with `seed`.
void write_block_image(const std::string& path, int place, uint64_t seed) {
  Random random(seed);
  data::Image image;
  image.reset({1, 8, 8});
  for (float& v : image.pixels) v = float(random.uniform(0.0, 60.0));
  const int top = place / 2 * 5, left = place % 2 * 5;
  for (int h = top; h < top + 3; ++h) {
    for (int w = left; w < left + 3; ++w) image.pixels[size_t(h * 8 + w)] = 250.0f;
  }
  std::filesystem::create_directories(std::filesystem::path(path).parent_path());
  data::write_image_file(path, image, data::ImageFormat::png);
}

// root/<name>/k.png for each class name; the block's place is the name's index in `places`.
void write_folder(const std::string& root, const std::vector<std::string>& names, int per_class,
                  uint64_t seed) {
  const std::vector<std::string> places = {"ant", "bee", "cat", "dog"};
  for (const std::string& name : names) {
    const int place = int(std::find(places.begin(), places.end(), name) - places.begin());
    for (int k = 0; k < per_class; ++k) {
      write_block_image(root + "/" + name + "/" + std::to_string(k) + ".png", place,
                        seed + uint64_t(place * 1000 + k));
    }
  }
}

std::string folder_config(const std::string& train, const std::string& test, int outputs) {
  return R"(name: blocks
seed: 2
data:
  train:
    source: {format: image_folder, root: )" +
         train + R"(, channels: 1}
    batch_size: 8
    transform: [{scale: 0.00392157}]
  test:
    source: {format: image_folder, root: )" +
         test + R"(, channels: 1}
    batch_size: 5
    transform: [{scale: 0.00392157}]
model:
  inputs: {data: [1, 8, 8], label: []}
  layers:
    - {name: conv1, type: Convolution, bottom: data, top: conv1, num_output: 4, kernel_size: 3}
    - {name: relu1, type: ReLU, bottom: conv1, top: conv1}
    - {name: fc, type: InnerProduct, bottom: conv1, top: fc, num_output: )" +
         std::to_string(outputs) + R"(}
    - {name: loss, type: SoftmaxWithLoss, bottom: [fc, label], top: loss}
    - {name: accuracy, type: Accuracy, bottom: [fc, label], top: accuracy, phase: test}
solver: {type: sgd, base_lr: 0.1, momentum: 0.9, max_iter: 60, display: 20, test_interval: 0}
)";
}

struct FolderRun {
  std::string dir = testing::fresh_dir(testing::test_name());
  CommandOptions options;

  FolderRun(const std::vector<std::string>& train, const std::vector<std::string>& test,
            int outputs) {
    write_folder(dir + "/train", train, 10, 1);
    write_folder(dir + "/val", test, 5, 2);
    options.config = dir + "/net.yaml";
    testing::write_text(options.config, folder_config(dir + "/train", dir + "/val", outputs));
    options.out_dir = dir + "/run";
    options.threads = 2;
  }
};

// The run keeps its class list; a validation folder that lacks a class is labelled by the train
// list (bee stays 1, not 0), so accuracy is that of the trained classes.
TEST(ClassList, KeptWithTheRunAndLabelsTheTestFolder) {
  FolderRun run({"ant", "bee", "cat"}, {"bee", "cat"}, 3);
  std::ostringstream log;
  const TrainSummary s = train_command(run.options, log);
  EXPECT_EQ(read_text(run.dir + "/run/classes.txt"), "ant\nbee\ncat\n");
  EXPECT_CONTAINS(read_text(run.dir + "/run/checkpoints/last/state.json"),
                  "\"classes\": [\n    \"ant\",\n    \"bee\",\n    \"cat\"\n  ]");
  ASSERT_EQ(s.final_test.size(), 2u) << log.str();
  EXPECT_GT(s.final_test[0].second, 0.9) << log.str();  // shifted labels would give ~0

  // crema test on the weights of the run reads the list beside them and agrees.
  run.options.weights = run.dir + "/run/final.safetensors";
  std::ostringstream test_log;
  const auto results = test_command(run.options, test_log);
  EXPECT_NEAR(results[0].second, s.final_test[0].second, 1e-9);
}

TEST(ClassList, ATestClassTheRunDoesNotKnowIsRefusedNamingBothLists) {
  FolderRun run({"ant", "bee"}, {"bee", "dog"}, 2);
  std::ostringstream log;
  const std::string e = error_of([&] { train_command(run.options, log); });
  EXPECT_CONTAINS(e, "net.yaml:");
  EXPECT_CONTAINS(e, "[bee, dog] are not those of data.train's source [ant, bee]");
  EXPECT_CONTAINS(e, "it has 'dog'");
  EXPECT_FALSE(std::filesystem::exists(run.dir + "/run"));
}

TEST(ClassList, FineTuningOnTheSameNumberOfOtherClassesIsRefused) {
  FolderRun run({"ant", "bee"}, {"ant", "bee"}, 2);
  std::ostringstream log;
  run.options.overrides = {"solver.max_iter=2"};
  train_command(run.options, log);
  write_folder(run.dir + "/other", {"cat", "dog"}, 4, 3);
  run.options.weights = run.dir + "/run/final.safetensors";
  run.options.out_dir = run.dir + "/run2";
  run.options.overrides.push_back("data.train.source.root=" + run.dir + "/other");
  run.options.overrides.push_back("data.test.source.root=" + run.dir + "/other");
  const std::string e = error_of([&] { train_command(run.options, log); });
  EXPECT_CONTAINS(e, "trained on the classes [ant, bee]");
  EXPECT_CONTAINS(e, "classes.txt) but data.train's source has [cat, dog]");
  // A new head (renamed, so not copied) of another size is the usual fine-tuning and passes.
  run.options.overrides.push_back("model.layers.fc.name=fc_new");
  EXPECT_EQ(train_command(run.options, log).iterations, 2);
}

TEST(ClassList, ResumingOnOtherClassesIsRefused) {
  FolderRun run({"ant", "bee"}, {"ant", "bee"}, 2);
  std::ostringstream log;
  run.options.stop_after = 2;
  train_command(run.options, log);
  write_folder(run.dir + "/other", {"ant", "cat"}, 10, 4);
  run.options.stop_after = 0;
  run.options.resume = run.dir + "/run";
  run.options.overrides = {"data.train.source.root=" + run.dir + "/other",
                           "data.test.source.root=" + run.dir + "/other"};
  const std::string e = error_of([&] { train_command(run.options, log); });
  EXPECT_CONTAINS(e, "cannot resume from ");
  EXPECT_CONTAINS(e, "trained on the classes [ant, bee] but the train source now has [ant, cat]");
}

// A head with fewer outputs than the data's classes is found before the first step, naming the
// loss layer, the layer to change and the source.
TEST(ClassList, AHeadTooSmallForTheClassesIsNamedBeforeTraining) {
  FolderRun run({"ant", "bee", "cat"}, {"ant", "bee", "cat"}, 2);
  std::ostringstream log;
  const std::string e = error_of([&] { train_command(run.options, log); });
  EXPECT_CONTAINS(
      e, "net.yaml:18:7: layer 'loss' (SoftmaxWithLoss) scores 2 classes ('fc' is [8, 2])");
  EXPECT_CONTAINS(e, "/train' (30 images, 3 classes");
  EXPECT_CONTAINS(e, "has 3 (labels 0..2); give layer 'fc' 3 outputs");
  EXPECT_EQ(log.str(), "");
}

TEST(Predict, TopClassesWithNamesFromTheRun) {
  FolderRun run({"ant", "bee", "cat", "dog"}, {"ant", "bee", "cat", "dog"}, 4);
  std::ostringstream log;
  train_command(run.options, log);
  write_block_image(run.dir + "/new/a.png", 2, 77);  // a cat
  write_block_image(run.dir + "/new/b.png", 1, 78);  // a bee
  CommandOptions predict = run.options;
  predict.weights = run.dir + "/run/checkpoints/last/model.safetensors";
  predict.images = {run.dir + "/new/a.png", run.dir + "/new/b.png"};
  predict.top_k = 2;
  std::ostringstream out;
  const std::vector<Prediction> p = predict_command(predict, out);
  ASSERT_EQ(p.size(), 2u);
  ASSERT_EQ(p[0].top.size(), 2u);
  EXPECT_EQ(p[0].top[0].name, "cat");
  EXPECT_EQ(p[0].top[0].label, 2);
  EXPECT_EQ(p[1].top[0].name, "bee");
  EXPECT_GT(p[0].top[0].probability, p[0].top[1].probability);
  EXPECT_GT(p[0].top[0].probability, 0.5);
  EXPECT_LE(p[0].top[0].probability + p[0].top[1].probability, 1.0 + 1e-9);
  EXPECT_CONTAINS(out.str(), run.dir + "/new/a.png\n   1  ");
  EXPECT_CONTAINS(out.str(), "  cat (2)\n");

  // --json, and --labels over the run's list.
  testing::write_text(run.dir + "/names.txt", "A\nB\nC\nD\n");
  predict.labels = run.dir + "/names.txt";
  predict.json = true;
  std::ostringstream json;
  predict_command(predict, json);
  EXPECT_CONTAINS(json.str(), "\"image\": \"" + run.dir + "/new/a.png\"");
  EXPECT_CONTAINS(json.str(),
                  "\"label\": 2,\n        \"class\": \"C\",\n        \"probability\": ");

  testing::write_text(run.dir + "/names.txt", "A\nB\n");
  EXPECT_CONTAINS(error_of([&] { predict_command(predict, json); }),
                  "names.txt names 2 classes but the net scores 4");
  predict.labels.clear();
  testing::write_text(run.dir + "/new/broken.png", "not an image");
  predict.images = {run.dir + "/new/a.png", run.dir + "/new/broken.png"};
  EXPECT_CONTAINS(error_of([&] { predict_command(predict, json); }), run.dir + "/new/broken.png");
}

// Data paths are relative to the file that writes them (as _base_ is); --set paths to the working
// directory; the saved config.yaml holds them absolute.
TEST(DataPaths, RelativeToTheConfigFile) {
  FolderRun run({"ant", "bee"}, {"ant", "bee"}, 2);
  std::filesystem::create_directories(run.dir + "/configs/base");
  testing::write_text(run.dir + "/configs/base/net.yaml",
                      folder_config("../../train", "../../val", 2));
  testing::write_text(run.dir + "/configs/child.yaml",
                      "_base_: base/net.yaml\ndata: {test: {source: {root: ../train}}}\n");
  const std::string train = std::filesystem::path(run.dir + "/train").lexically_normal().string();
  const ConfigNode root = load_run_config(run.dir + "/configs/child.yaml", {});
  EXPECT_EQ(root.at("data").at("train").at("source").get<std::string>("root"), train);
  EXPECT_EQ(root.at("data").at("test").at("source").get<std::string>("root"), train);
  const ConfigNode set =
      load_run_config(run.dir + "/configs/child.yaml", {"data.test.source.root=photos/val"});
  EXPECT_EQ(set.at("data").at("test").at("source").get<std::string>("root"), "photos/val");

  run.options.config = run.dir + "/configs/child.yaml";
  run.options.overrides = {"solver.max_iter=1"};
  std::ostringstream log;
  EXPECT_EQ(train_command(run.options, log).iterations, 1);
  EXPECT_CONTAINS(read_text(run.dir + "/run/config.yaml"), "root: " + train + "\n");
}

// `{normalize: imagenet}` in a config is the preset; a misspelt one names the file and line.
TEST(DataConfig, NormalizePresetByName) {
  const auto transforms =
      read_transforms(parse_config("[{scale: 0.00392157}, {normalize: imagenet}]", "t.yaml"));
  ASSERT_EQ(transforms.size(), 2u);
  EXPECT_CONTAINS(transforms[1]->description(), "normalize(mean=[0.485");
  EXPECT_CONTAINS(transforms[1]->description(), "std=[0.229");
  EXPECT_CONTAINS(
      error_of([] { read_transforms(parse_config("[{normalize: imagenett}]", "t.yaml")); }),
      "t.yaml:1:2: transform normalize: 'imagenett' is not a value or a preset");
}

// An option given as a word ({interpolation: bilinear}) reaches the transform as one.
TEST(DataConfig, TransformWordOptions) {
  const auto transforms =
      read_transforms(parse_config("[{random_rotation: {degrees: 10, interpolation: bilinear}}, "
                                   "{random_erasing: {value: random}}]",
                                   "t.yaml"));
  ASSERT_EQ(transforms.size(), 2u);
  EXPECT_CONTAINS(transforms[0]->description(), "interpolation=bilinear");
  EXPECT_CONTAINS(transforms[1]->description(), "value=random");
  EXPECT_CONTAINS(error_of([] {
                    read_transforms(parse_config(
                        "[{random_rotation: {degrees: 10, interpolation: cubic}}]", "t.yaml"));
                  }),
                  "t.yaml:1:2: transform random_rotation: 'interpolation' must be one of");
}

// A run that fails before its first checkpoint is marked FAILED, with the error.
TEST(FailedRun, IsMarked) {
  FolderRun run({"ant", "bee"}, {"ant", "bee"}, 2);
  testing::write_text(run.dir + "/train/bee/zz_broken.png", "not an image");
  std::ostringstream log;
  const std::string e = error_of([&] { train_command(run.options, log); });
  EXPECT_CONTAINS(e, "zz_broken.png");
  const std::string failed = read_text(run.dir + "/run/FAILED");
  EXPECT_CONTAINS(failed, "zz_broken.png");
  EXPECT_CONTAINS(failed, "no checkpoint was written");
  std::filesystem::remove(run.dir + "/train/bee/zz_broken.png");
  train_command(run.options, log);
  EXPECT_FALSE(std::filesystem::exists(run.dir + "/run/FAILED"));
}

TEST(Summary, CountsTrainedAndFrozenParametersApart) {
  FolderRun run({"ant", "bee"}, {"ant", "bee"}, 2);
  run.options.overrides = {"+solver.param_groups=[{match: 'conv1\\..*', lr_mult: 0}]"};
  std::ostringstream out;
  summary_command(run.options, out);
  // conv1: 4 x 1 x 3 x 3 + 4 = 40 frozen; fc: 2 x (4 x 6 x 6) + 2 = 290 trained.
  EXPECT_CONTAINS(out.str(), "parameters: 290 trained, 40 frozen (lr_mult 0)\n");
  std::ostringstream log;
  run.options.overrides.push_back("solver.max_iter=1");
  train_command(run.options, log);
  EXPECT_CONTAINS(log.str(), "290 parameters trained and 40 frozen");
}

}  // namespace
}  // namespace crema
