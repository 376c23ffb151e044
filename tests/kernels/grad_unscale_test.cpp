// Unscaling gradients on the CPU: values by hand, many gradients (empty, odd, one large enough for
// threads) against ref<float> (bit for bit) and ref<double>, inf, -inf and NaN found wherever they
// sit, large finite values not taken for overflow, a flag that is set and never cleared, the same
// bits for any thread count, and the dispatch's checks. (CUDA against this path:
// grad_unscale_cuda_test.cpp.)
#include "kernels/optimizers/grad_unscale.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "core/context.h"
#include "tests/kernels/kernel_test_util.h"
#include "tests/support/error_text.h"

namespace crema::kernels {
namespace {

constexpr float kInf = std::numeric_limits<float>::infinity();
constexpr float kMax = std::numeric_limits<float>::max();

// 0 and sizes that are no multiple of a vector width, and one above the threading threshold.
std::vector<int64_t> sizes() {
  return {1, 0, 7, 33, 1000, 70001, 5};
}

std::vector<Tensor> random_grads(uint64_t seed, double range) {
  Random rng(seed);
  std::vector<Tensor> grads;
  for (int64_t n : sizes()) grads.push_back(testing::random_tensor(rng, {n}, -range, range));
  return grads;
}

std::vector<Tensor*> pointers(std::vector<Tensor>& grads) {
  std::vector<Tensor*> out;
  for (Tensor& g : grads) out.push_back(&g);
  return out;
}

// The unscaled values and the flag as ref<float> computes them.
struct Expected {
  std::vector<std::vector<float>> values;
  bool found_inf = false;
};
Expected reference(const std::vector<Tensor>& grads, float inv_scale) {
  Expected e;
  for (const Tensor& g : grads) {
    std::vector<float> v = g.to_vector();
    e.found_inf |= ref::unscale_gradients<float>(int64_t(v.size()), v.data(), inv_scale);
    e.values.push_back(v);
  }
  return e;
}

float run(Context& ctx, std::vector<Tensor>& grads, float inv_scale, float flag_before = 0.0f) {
  Tensor found_inf = Tensor::from_vector({}, {flag_before});
  unscale_gradients(ctx, pointers(grads), inv_scale, found_inf);
  return found_inf.to_vector()[0];
}

TEST(UnscaleGradients, ByHand) {
  Context ctx;
  std::vector<Tensor> grads = {Tensor::from_vector({3}, {65536.0f, -3.0f, 1e-30f}),
                               Tensor::from_vector({2}, {kMax, -kMax})};
  EXPECT_EQ(run(ctx, grads, 1.0f / 65536.0f), 0.0f);  // large but finite: no overflow
  EXPECT_EQ(grads[0].to_vector(), (std::vector<float>{1.0f, -3.0f / 65536.0f, 1e-30f / 65536.0f}));
  EXPECT_EQ(grads[1].to_vector(), (std::vector<float>{kMax / 65536.0f, -kMax / 65536.0f}));
}

// Every element is float's product g * inv_scale (one rounding, as ref<float>), and within
// float's rounding of the double product; no flag for finite gradients.
TEST(UnscaleGradients, ManyGradientsMatchTheReference) {
  for (const float inv_scale : {1.0f / 65536.0f, 1.0f / 3.0f, 1.0f, 8.0f}) {
    SCOPED_TRACE("inv_scale " + std::to_string(inv_scale));
    std::vector<Tensor> grads = random_grads(3, 1000.0);
    const Expected expected = reference(grads, inv_scale);
    std::vector<std::vector<double>> exact;
    for (const Tensor& g : grads) {
      std::vector<double> v = testing::to_double(g);
      EXPECT_FALSE(ref::unscale_gradients<double>(int64_t(v.size()), v.data(), double(inv_scale)));
      exact.push_back(v);
    }
    Context ctx(Device::cpu(), 1, 4);
    EXPECT_EQ(run(ctx, grads, inv_scale), 0.0f);
    EXPECT_FALSE(expected.found_inf);
    for (size_t k = 0; k < grads.size(); ++k) {
      EXPECT_EQ(grads[k].to_vector(), expected.values[k]) << "gradient " << k;
      EXPECT_LT(testing::rel_error(grads[k].to_vector(), exact[k]), 1e-7) << "gradient " << k;
    }
  }
}

// One inf, -inf or NaN anywhere (the first element, the last, inside the threaded gradient, in the
// last gradient of the list) sets the flag; every other element is still unscaled.
TEST(UnscaleGradients, FindsEveryNonFiniteValueWhereverItSits) {
  struct Place {
    size_t gradient;
    int64_t index;
  };
  const std::vector<Place> places = {{0, 0},     {2, 6},     {4, 999}, {5, 0},
                                     {5, 41234}, {5, 70000}, {6, 4}};
  for (const float bad : {kInf, -kInf, testing::kNaN}) {
    for (const Place& place : places) {
      SCOPED_TRACE(std::to_string(bad) + " in gradient " + std::to_string(place.gradient) + " at " +
                   std::to_string(place.index));
      std::vector<Tensor> grads = random_grads(5, 1.0);
      grads[place.gradient].data<float>()[place.index] = bad;
      const Expected expected = reference(grads, 0.25f);
      ASSERT_TRUE(expected.found_inf);
      Context ctx(Device::cpu(), 1, 3);
      EXPECT_EQ(run(ctx, grads, 0.25f), 1.0f);
      for (size_t k = 0; k < grads.size(); ++k) {
        const std::vector<float> got = grads[k].to_vector();
        for (size_t i = 0; i < got.size(); ++i) {
          const float want = expected.values[k][i];
          if (std::isnan(want)) {
            EXPECT_TRUE(std::isnan(got[i])) << k << ", " << i;
          } else {
            EXPECT_EQ(got[i], want) << k << ", " << i;
          }
        }
      }
    }
  }
}

// The test is on the gradient as it arrives: finite values that the multiplication overflows
// (inv_scale > 1 only happens with a scale below 1) are no overflow of the step's gradients.
TEST(UnscaleGradients, ChecksTheValuesBeforeTheyAreMultiplied) {
  Context ctx;
  std::vector<Tensor> grads = {Tensor::from_vector({2}, {kMax, 1.0f})};
  EXPECT_EQ(run(ctx, grads, 4.0f), 0.0f);
  EXPECT_EQ(grads[0].to_vector(), (std::vector<float>{kInf, 4.0f}));
}

// found_inf accumulates: a call over finite gradients leaves a set flag set.
TEST(UnscaleGradients, NeverClearsTheFlag) {
  Context ctx;
  std::vector<Tensor> grads = random_grads(7, 1.0);
  EXPECT_EQ(run(ctx, grads, 0.5f, 1.0f), 1.0f);
  std::vector<Tensor> none;
  EXPECT_EQ(run(ctx, none, 0.5f, 0.0f), 0.0f);  // an empty list is allowed and finds nothing
}

TEST(UnscaleGradients, SameBitsForAnyThreadCount) {
  std::vector<std::vector<float>> first;
  for (int threads : {1, 2, 3}) {  // 5 leaked libomp's team under LeakSanitizer
    std::vector<Tensor> grads = random_grads(11, 50.0);
    grads[5].data<float>()[12345] = kInf;
    Context ctx(Device::cpu(), 1, threads);
    EXPECT_EQ(run(ctx, grads, 1.0f / 1024.0f), 1.0f) << threads << " threads";
    for (size_t k = 0; k < grads.size(); ++k) {
      if (threads == 1) {
        first.push_back(grads[k].to_vector());
      } else {
        EXPECT_EQ(grads[k].to_vector(), first[k]) << threads << " threads, gradient " << k;
      }
    }
  }
}

TEST(UnscaleGradients, ChecksItsArguments) {
  Context ctx;
  Tensor g = Tensor::from_vector({2}, {1.0f, 2.0f});
  Tensor flag = Tensor::from_vector({}, {0.0f});
  for (const float inv_scale : {0.0f, -1.0f, kInf, testing::kNaN}) {
    EXPECT_CONTAINS(
        crema::testing::error_of([&] { unscale_gradients(ctx, {&g}, inv_scale, flag); }),
        "unscale_gradients: inv_scale is");
  }
  Tensor wide({2}, DType::f64);
  EXPECT_CONTAINS(crema::testing::error_of([&] {
                    unscale_gradients(ctx, {&g, &wide}, 1.0f, flag);
                  }),
                  "unscale_gradients: gradient 1 is f64[2]");
  Tensor two_flags = Tensor::from_vector({2}, {0.0f, 0.0f});
  EXPECT_CONTAINS(crema::testing::error_of([&] { unscale_gradients(ctx, {&g}, 1.0f, two_flags); }),
                  "found_inf");
  EXPECT_EQ(g.to_vector(), (std::vector<float>{1.0f, 2.0f}));  // nothing ran
}

}  // namespace
}  // namespace crema::kernels
