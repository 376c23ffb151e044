// Batch mixing (data/batch_mix.h): mixup and cutmix against torchvision v2's arithmetic at a fixed
// lambda and box centre (tests/fixtures/make_batch_mix_fixtures.py), the Beta draws, the choice
// between the two, the loader's soft targets and their determinism, and the refused options.
#include "data/batch_mix.h"

#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "core/error.h"
#include "data/loader.h"
#include "tests/fixtures/safetensors_fixture.h"
#include "tests/support/error_text.h"

namespace crema::data {
namespace {

using crema::testing::error_of;
using crema::testing::SafetensorsFixture;

const SafetensorsFixture& fixture() {
  static const SafetensorsFixture f("batch_mix_fixtures.safetensors");
  return f;
}

constexpr int64_t kClasses = 5;

// The fixture's batch [4, 3, 6, 8] and its one-hot targets, to be mixed in place.
struct FixtureBatch {
  std::vector<float> images = fixture().floats("images");
  std::vector<float> targets = std::vector<float>(4 * kClasses);
  FixtureBatch() {
    one_hot_targets(fixture().floats("labels").data(), 4, kClasses, 0.0, targets.data());
  }
};

// torchvision computes in float32 as crema does; a product may still round differently where the
// compiler fuses a multiply-add: a few units in the last place.
void expect_close(const std::vector<float>& got, const std::vector<float>& want) {
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i) {
    EXPECT_NEAR(got[i], want[i], 4e-7 * std::max(1.0f, std::abs(want[i]))) << "element " << i;
  }
}

TEST(BatchMix, MixupMatchesTorchvisionV2) {
  FixtureBatch b;
  const double lambda = fixture().doubles("mixup_lambda")[0];
  apply_batch_mix({MixDraw::Kind::mixup, lambda}, {3, 6, 8}, 4, b.images.data(), kClasses,
                  b.targets.data());
  expect_close(b.images, fixture().floats("mixup_images"));
  expect_close(b.targets, fixture().floats("mixup_targets"));
}

TEST(BatchMix, CutmixMatchesTorchvisionV2) {
  for (const std::string name : {"cutmix_edge", "cutmix_inside"}) {
    SCOPED_TRACE(name);
    FixtureBatch b;
    const std::vector<double> p = fixture().doubles(name + "_params");  // lambda, r_y, r_x
    const MixDraw box = cutmix_box(p[0], 6, 8, int64_t(p[1]), int64_t(p[2]));
    const std::vector<double> want_box = fixture().doubles(name + "_box");  // y0, y1, x0, x1
    EXPECT_EQ(std::vector<double>({double(box.y0), double(box.y1), double(box.x0), double(box.x1)}),
              want_box);
    EXPECT_DOUBLE_EQ(box.lambda, fixture().doubles(name + "_lambda")[0]);
    apply_batch_mix(box, {3, 6, 8}, 4, b.images.data(), kClasses, b.targets.data());
    EXPECT_EQ(b.images, fixture().floats(name + "_images"));  // a copy: exact
    expect_close(b.targets, fixture().floats(name + "_targets"));
  }
}

TEST(BatchMix, CutmixBoxByHand) {
  // lambda 0.36: r = sqrt(0.64) / 2 = 0.4, half sides int(0.4 * 10) = 4.
  const MixDraw inside = cutmix_box(0.36, 10, 10, 5, 5);
  EXPECT_EQ((std::vector<int64_t>{inside.y0, inside.y1, inside.x0, inside.x1}),
            (std::vector<int64_t>{1, 9, 1, 9}));
  EXPECT_DOUBLE_EQ(inside.lambda, 1.0 - 64.0 / 100.0);
  const MixDraw corner = cutmix_box(0.36, 10, 10, 0, 9);  // clipped to rows 0..3, columns 5..9
  EXPECT_EQ((std::vector<int64_t>{corner.y0, corner.y1, corner.x0, corner.x1}),
            (std::vector<int64_t>{0, 4, 5, 10}));
  EXPECT_DOUBLE_EQ(corner.lambda, 1.0 - 20.0 / 100.0);
}

TEST(BatchMix, OneHotTargetsAreSmoothedAsTorch) {
  const std::vector<float> labels = {2, 0};
  std::vector<float> t(6);
  one_hot_targets(labels.data(), 2, 3, 0.3, t.data());
  // (1 - eps) onehot + eps / K with eps = 0.3, K = 3: 0.8 on the label, 0.1 elsewhere.
  expect_close(t, {0.1f, 0.1f, 0.8f, 0.8f, 0.1f, 0.1f});
  const std::vector<float> bad = {1, 3};
  EXPECT_CONTAINS(error_of([&] { one_hot_targets(bad.data(), 2, 3, 0.0, t.data()); }),
                  "label 3 of sample 1 is not a class index in [0, 3)");
}

// Beta(a, a) has mean 1/2 and variance 1 / (4 (2a + 1)). 20,000 draws: the mean's standard error
// is at most 0.0036 and the variance's below 0.0008; the bounds are about five of them.
TEST(BatchMix, BetaDrawsHaveTheBetaMoments) {
  for (double alpha : {0.1, 0.2, 1.0, 4.0}) {
    SCOPED_TRACE(alpha);
    Random random(7);
    const int n = 20000;
    double sum = 0, sum_sq = 0;
    for (int i = 0; i < n; ++i) {
      const double lambda = beta_symmetric(random, alpha);
      ASSERT_TRUE(lambda >= 0.0 && lambda <= 1.0) << lambda;
      sum += lambda;
      sum_sq += lambda * lambda;
    }
    const double mean = sum / n, variance = sum_sq / n - mean * mean;
    EXPECT_NEAR(mean, 0.5, 0.018);
    EXPECT_NEAR(variance, 1.0 / (4.0 * (2.0 * alpha + 1.0)), 0.004);
  }
}

TEST(BatchMix, TheChoiceFollowsTheProbabilities) {
  auto count = [](const BatchMixOptions& options) {
    Random random(3);
    std::vector<int> kinds(3, 0);
    for (int i = 0; i < 4000; ++i) {
      const MixDraw d = draw_batch_mix(options, 6, 8, random);
      ++kinds[size_t(d.kind)];
      if (d.kind == MixDraw::Kind::cutmix) {
        EXPECT_TRUE(d.y0 >= 0 && d.y0 <= d.y1 && d.y1 <= 6 && d.x0 >= 0 && d.x0 <= d.x1 &&
                    d.x1 <= 8);
      }
    }
    return kinds;  // none, mixup, cutmix
  };
  BatchMixOptions both;
  both.mixup_alpha = 0.2;
  both.cutmix_alpha = 1.0;
  const std::vector<int> even = count(both);  // switch_prob 0.5, prob 1
  EXPECT_EQ(even[0], 0);
  EXPECT_NEAR(even[2] / 4000.0, 0.5, 0.04);
  both.switch_prob = 1.0;
  EXPECT_EQ(count(both)[2], 4000);
  both.switch_prob = 0.0;
  EXPECT_EQ(count(both)[1], 4000);
  both.prob = 0.25;
  EXPECT_NEAR(count(both)[0] / 4000.0, 0.75, 0.04);
  BatchMixOptions cut_only;
  cut_only.cutmix_alpha = 1.0;
  EXPECT_EQ(count(cut_only)[2], 4000);
}

TEST(BatchMix, BadOptionsNameTheKey) {
  auto message = [](auto change) {
    BatchMixOptions o;
    o.mixup_alpha = 0.2;
    change(o);
    return error_of([&] { check_batch_mix(o); });
  };
  EXPECT_CONTAINS(message([](BatchMixOptions& o) { o.mixup_alpha = -1; }),
                  "batch_mix.mixup_alpha is -1, must be 0 (off) or positive");
  EXPECT_CONTAINS(message([](BatchMixOptions& o) { o.cutmix_alpha = NAN; }),
                  "batch_mix.cutmix_alpha is nan");
  EXPECT_CONTAINS(message([](BatchMixOptions& o) { o.mixup_alpha = 0; }),
                  "batch_mix mixes nothing");
  EXPECT_CONTAINS(message([](BatchMixOptions& o) { o.switch_prob = 1.5; }),
                  "batch_mix.switch_prob is 1.5, must be in [0, 1]");
  EXPECT_CONTAINS(message([](BatchMixOptions& o) { o.prob = -0.1; }), "batch_mix.prob is -0.1");
  EXPECT_CONTAINS(message([](BatchMixOptions& o) { o.label_smoothing = 1; }),
                  "batch_mix.label_smoothing is 1, must be in [0, 1)");
  BatchMixOptions good;
  good.cutmix_alpha = 1.0;
  EXPECT_NO_THROW(check_batch_mix(good));
}

// --- in the loader ---

// 40 samples of 2 x 4 x 6 whose pixels carry their index; label (3 i) mod 11.
class PatternDataset : public Dataset {
 public:
  explicit PatternDataset(Shape shape = {2, 4, 6}) : shape_(std::move(shape)) {}
  int64_t size() const override { return 40; }
  const Shape& sample_shape() const override { return shape_; }
  int64_t num_classes() const override { return 11; }
  void read_sample(int64_t index, Image& out) const override {
    out.reset(shape_);
    for (size_t j = 0; j < out.pixels.size(); ++j) out.pixels[j] = float(100 * index + j);
  }
  int64_t label(int64_t index) const override { return (3 * index) % 11; }
  std::string description() const override { return "pattern dataset"; }

 private:
  Shape shape_;
};

DataLoaderOptions mixing_options(int workers, uint64_t seed = 5) {
  DataLoaderOptions o;
  o.batch_size = 8;
  o.shuffle = true;
  o.drop_last = false;  // 5 batches of 8
  o.seed = seed;
  o.num_workers = workers;
  o.target_classes = 11;
  o.batch_mix = BatchMixOptions{0.4, 1.0, 0.5, 0.9, 0.1};
  return o;
}

std::vector<std::vector<float>> stream(DataLoaderOptions options, int batches) {
  DataLoader loader(std::make_shared<PatternDataset>(), std::move(options));
  std::vector<std::vector<float>> out;
  for (int b = 0; b < batches; ++b) {
    const Batch batch = loader.next();
    out.push_back(batch.data.to_vector());
    out.push_back(batch.targets.to_vector());
    out.push_back(batch.labels.to_vector());
  }
  return out;
}

TEST(BatchMixLoader, SameSeedSameBatchesWithAnyWorkerCount) {
  const auto inline_stream = stream(mixing_options(0), 12);  // two epochs and a bit
  EXPECT_EQ(stream(mixing_options(1), 12), inline_stream);
  EXPECT_EQ(stream(mixing_options(3), 12), inline_stream);
  EXPECT_NE(stream(mixing_options(3, 6), 12), inline_stream);
}

TEST(BatchMixLoader, TargetsAreMixedOneHotRowsAndLabelsStayHard) {
  DataLoaderOptions plain = mixing_options(2);
  plain.batch_mix.reset();
  DataLoader mixed(std::make_shared<PatternDataset>(), mixing_options(2));
  DataLoader unmixed(std::make_shared<PatternDataset>(), plain);
  int mixed_batches = 0;
  for (int b = 0; b < 10; ++b) {
    const Batch m = mixed.next(), u = unmixed.next();
    EXPECT_EQ(m.labels.to_vector(), u.labels.to_vector());
    EXPECT_EQ(m.targets.shape(), (Shape{m.labels.numel(), 11}));
    const std::vector<float> t = m.targets.to_vector(), one_hot = u.targets.to_vector();
    const std::vector<float> labels = u.labels.to_vector();
    for (int64_t i = 0; i < m.labels.numel(); ++i) {
      double sum = 0;
      for (int64_t c = 0; c < 11; ++c) sum += t[size_t(i * 11 + c)];
      EXPECT_NEAR(sum, 1.0, 1e-6);
      // Unmixed: exactly one-hot, as the test split feeds them.
      EXPECT_EQ(one_hot[size_t(i * 11 + int64_t(labels[size_t(i)]))], 1.0f);
    }
    mixed_batches += m.data.to_vector() != u.data.to_vector() ? 1 : 0;
  }
  // prob 0.9: most of the 10 batches are mixed (each test's draws are fixed by the seed).
  EXPECT_GE(mixed_batches, 6);
}

TEST(BatchMixLoader, RefusesWhatCannotWork) {
  auto message = [](DataLoaderOptions o, Shape shape = {2, 4, 6}) {
    return error_of([&] { DataLoader(std::make_shared<PatternDataset>(shape), o); });
  };
  DataLoaderOptions no_targets = mixing_options(0);
  no_targets.target_classes = 0;
  EXPECT_CONTAINS(message(no_targets), "model.inputs.label: [K] for K classes");
  DataLoaderOptions narrow = mixing_options(0);
  narrow.target_classes = 10;
  EXPECT_CONTAINS(message(narrow), "has 11 classes, more than the soft targets' 10");
  EXPECT_CONTAINS(message(mixing_options(0), {48}),
                  "batch_mix.cutmix_alpha needs samples with H x W axes, got [48]");
  DataLoaderOptions bad = mixing_options(0);
  bad.batch_mix->prob = 2;
  EXPECT_CONTAINS(message(bad), "batch_mix.prob is 2");
  DataLoaderOptions mixup_only = mixing_options(0);
  mixup_only.batch_mix->cutmix_alpha = 0;
  EXPECT_NO_THROW(
      DataLoader(std::make_shared<PatternDataset>(Shape{48}), mixup_only));  // any shape
}

}  // namespace
}  // namespace crema::data
