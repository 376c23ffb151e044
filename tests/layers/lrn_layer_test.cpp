// LRN layer: numerical gradient checks in both regions (windows clipped at the borders, a window
// wider than the channels), PyTorch's nn.LocalResponseNorm through the layer, and configuration
// errors naming the layer and the key.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "core/error.h"
#include "tests/fixtures/norm_fixture.h"
#include "tests/kernels/kernel_test_util.h"
#include "tests/support/layer_checks.h"

namespace crema::testing {
namespace {

// Uniform inputs in [-1.5, 1.5), a range where both LRN regions have sizeable gradients.
void gradient_check(const std::string& yaml, const Shape& shape) {
  check_layer_gradients(yaml, shape, random_input(shape, 17, 1.5f));
}

TEST(LRNLayer, GradientAcrossChannels) {
  gradient_check("{name: norm, type: LRN, local_size: 3, alpha: 0.5}", {2, 6, 3, 4});
  gradient_check("{name: norm, type: LRN, local_size: 5, alpha: 2, beta: 0.6, k: 1.5}",
                 {1, 3, 2, 3});
}

TEST(LRNLayer, GradientWithinChannel) {
  gradient_check("{name: norm, type: LRN, norm_region: WITHIN_CHANNEL, local_size: 3, alpha: 2}",
                 {2, 2, 5, 4});
  gradient_check("{name: norm, type: LRN, norm_region: within_channel, local_size: 5, beta: 1}",
                 {1, 2, 3, 4});
}

TEST(LRNLayer, MatchesPyTorchLocalResponseNorm) {
  NormFixture f;
  Context ctx;
  const Shape shape = f.shape("lrn.x");
  LayerHarness h("{name: norm, type: LRN, local_size: 5, alpha: 0.3, beta: 0.75, k: 2}", {shape},
                 ctx);
  h.set_bottom(0, f.floats("lrn.x"));
  h.forward();
  EXPECT_LT(kernels::testing::rel_error(h.top[0]->value.to_vector(), f.doubles("lrn_across5.y")),
            1e-5);
  h.top[0]->grad.copy_from(f.input("lrn.dy"));
  h.layer->backward(h.top, {true}, h.bottom, ctx);
  EXPECT_LT(kernels::testing::rel_error(h.bottom[0]->grad.to_vector(), f.doubles("lrn_across5.dx")),
            1e-5);
}

void expect_error(const std::string& yaml, const std::vector<std::string>& parts,
                  const Shape& shape = {1, 3, 2, 2}) {
  expect_layer_error(yaml, {shape}, parts);
}

TEST(LRNLayer, BadKeysAreErrors) {
  expect_error("{name: norm, type: LRN, local_size: 4}",
               {"test:1:", "layer 'norm' (LRN)", "local_size: must be odd"});
  expect_error("{name: norm, type: LRN, local_size: 0}", {"layer 'norm' (LRN)", "local_size"});
  expect_error("{name: norm, type: LRN, local_size: -3}", {"layer 'norm' (LRN)", "local_size"});
  expect_error("{name: norm, type: LRN, norm_region: SPATIAL}",
               {"layer 'norm' (LRN)", "norm_region", "WITHIN_CHANNEL"});
  expect_error("{name: norm, type: LRN, k: 0}", {"layer 'norm' (LRN)", "k: must be positive"});
  expect_error("{name: norm, type: LRN, alpha: -1}", {"layer 'norm' (LRN)", "alpha"});
  expect_error("{name: norm, type: LRN}", {"layer 'norm' (LRN)", "[N, C, H, W]"}, {2, 3});
}

TEST(LRNLayer, DoesNotRunInPlace) {
  Context ctx;
  LayerHarness h("{name: norm, type: LRN}", {{1, 3, 2, 2}}, ctx);
  std::vector<Blob*> same = {h.bottom[0]};
  try {
    h.layer->reshape(same, same, ctx);
    ADD_FAILURE() << "accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("in place"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace crema::testing
