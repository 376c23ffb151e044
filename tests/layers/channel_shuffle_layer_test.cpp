// ChannelShuffle on the CPU: PyTorch's values by hand, the index formula on awkward shapes (every
// path of kernels::permute: general walk, batched transpose, copy), the numerical gradient check
// in float64, and the config errors (which must name the layer and the key).
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "core/context.h"
#include "tests/support/layer_checks.h"

namespace crema::testing {
namespace {

std::string shuffle_yaml(int64_t groups) {
  return "{name: shuffle, type: ChannelShuffle, groups: " + std::to_string(groups) + "}";
}

// torch.nn.ChannelShuffle(3)(torch.arange(24.).reshape(2, 6, 2)) (PyTorch 1.13): the channels
// 0 1 2 3 4 5 of each sample come out as 0 2 4 1 3 5.
TEST(ChannelShuffleLayer, MatchesPyTorchByHand) {
  Context ctx;
  LayerHarness h(shuffle_yaml(3), {{2, 6, 2}}, ctx);
  std::vector<float> x(24);
  for (size_t i = 0; i < x.size(); ++i) x[i] = float(i);
  h.set_bottom(0, x);
  h.forward();
  EXPECT_EQ(h.top[0]->value.shape(), (Shape{2, 6, 2}));
  EXPECT_EQ(h.top[0]->value.to_vector(),
            (std::vector<float>{0,  1,  4,  5,  8,  9,  2,  3,  6,  7,  10, 11,
                                12, 13, 16, 17, 20, 21, 14, 15, 18, 19, 22, 23}));
}

// y[n, k g + j, s] = x[n, j K + k, s], and backward the same map read the other way, exactly
// (a permutation copies values), on shapes that take each of kernels::permute's paths.
TEST(ChannelShuffleLayer, ForwardAndBackwardFollowTheIndexFormula) {
  struct Case {
    Shape x;
    int64_t groups;
  };
  const std::vector<Case> cases = {
      {{3, 15, 7}, 5},       // general permutation, odd sizes
      {{2, 12, 3, 5}, 4},    // 4-D
      {{2, 6, 2, 1, 3}, 3},  // 5-D: S is every trailing axis
      {{1, 10, 4, 3}, 2},    // N = 1: three axes left after simplification
      {{5, 12, 1, 1}, 3},    // S = 1: a batched transpose
      {{2, 8, 3, 3}, 1},     // one group: a copy
      {{2, 8, 3, 3}, 8},     // one channel per group: a copy
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(shape_str(c.x) + " groups " + std::to_string(c.groups));
    Context ctx;
    LayerHarness h(shuffle_yaml(c.groups), {c.x}, ctx);
    const std::vector<float> x = random_input(c.x, 7);
    h.set_bottom(0, x);
    h.forward();
    const std::vector<float> dy = random_input(c.x, 8);
    set_values(h.top[0]->grad, dy);
    h.layer->backward(h.top, {true}, h.bottom, ctx);

    const int64_t n = c.x[0], ch = c.x[1], s = shape_numel(c.x) / (n * ch), k_per = ch / c.groups;
    std::vector<float> want_y(x.size()), want_dx(x.size());
    for (int64_t b = 0; b < n; ++b) {
      for (int64_t j = 0; j < c.groups; ++j) {
        for (int64_t k = 0; k < k_per; ++k) {
          for (int64_t p = 0; p < s; ++p) {
            const size_t to = size_t((b * ch + k * c.groups + j) * s + p);
            const size_t from = size_t((b * ch + j * k_per + k) * s + p);
            want_y[to] = x[from];
            want_dx[from] = dy[to];
          }
        }
      }
    }
    EXPECT_EQ(h.top[0]->value.to_vector(), want_y);
    EXPECT_EQ(h.bottom[0]->grad.to_vector(), want_dx);
  }
}

TEST(ChannelShuffleLayer, Gradient) {
  check_gradient_cases("name: shuffle, type: ChannelShuffle", {{"groups: 3", {2, 6, 2, 3}},
                                                               {"groups: 2", {3, 4, 5}},
                                                               {"groups: 4", {2, 12, 1, 1}},
                                                               {"groups: 2", {1, 6, 2, 1, 2}},
                                                               {"groups: 1", {2, 3, 2, 2}}});
}

TEST(ChannelShuffleLayer, BadGroupsAreConfigErrors) {
  expect_layer_error(
      "{name: shuffle1, type: ChannelShuffle, groups: 4}", {{1, 6, 2, 2}},
      {"layer 'shuffle1' (ChannelShuffle)", "groups", "4 does not divide the 6 channels"});
  expect_layer_error("{name: shuffle1, type: ChannelShuffle}", {{1, 6, 2, 2}},
                     {"layer 'shuffle1' (ChannelShuffle)", "groups", "required"});
  expect_layer_error("{name: shuffle1, type: ChannelShuffle, groups: 0}", {{1, 6, 2, 2}},
                     {"layer 'shuffle1' (ChannelShuffle)", "groups", "at least 1"});
  expect_layer_error("{name: shuffle1, type: ChannelShuffle, groups: 2}", {{4, 6}},
                     {"layer 'shuffle1' (ChannelShuffle)", "at least 3 axes"});
}

}  // namespace
}  // namespace crema::testing
