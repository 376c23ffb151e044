#include "tests/support/layer_checks.h"

#include <gtest/gtest.h>

#include "core/error.h"

namespace crema::testing {

std::vector<float> random_input(const Shape& x, uint64_t seed, float range) {
  return random_values(size_t(shape_numel(x)), -range, range, seed);
}

void check_layer_gradients(const std::string& yaml, const Shape& x,
                           const std::vector<float>& values, const GradientCheckOptions& options,
                           Layout layout) {
  SCOPED_TRACE(yaml + " " + layout_name(layout));
  Context ctx;
  LayerHarness h(yaml, {x}, ctx, 1, Phase::train, DType::f64, layout);
  h.set_bottom(0, values);
  check_gradients(h, options);
}

Shape top_shape(const std::string& yaml, const std::vector<Shape>& bottoms) {
  Context ctx;
  LayerHarness h(yaml, bottoms, ctx);
  return h.top[0]->value.shape();
}

void check_gradient_cases(const std::string& head, const std::vector<GradientCase>& cases) {
  for (size_t i = 0; i < cases.size(); ++i) {
    const GradientCase& c = cases[i];
    check_layer_gradients("{" + head + ", " + c.keys + "}", c.x, random_input(c.x, i + 1));
  }
}

std::string layer_error(const std::string& yaml, const std::vector<Shape>& bottoms, int num_tops) {
  Context ctx;
  try {
    LayerHarness h(yaml, bottoms, ctx, num_tops);
    h.forward();
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

void expect_layer_error(const std::string& yaml, const std::vector<Shape>& bottoms,
                        const std::vector<std::string>& parts, int num_tops) {
  SCOPED_TRACE(yaml);
  const std::string message = layer_error(yaml, bottoms, num_tops);
  ASSERT_NE(message, "") << "accepted";
  for (const std::string& part : parts) {
    EXPECT_NE(message.find(part), std::string::npos) << "'" << part << "' not in: " << message;
  }
}

void check_frozen_parameters(const std::string& keys, const Shape& x, uint64_t seed) {
  for (const std::string frozen : {"weight", "bias"}) {
    SCOPED_TRACE(frozen);
    Context ctx;
    LayerHarness h("{" + keys + ", param: {" + frozen + ": {lr_mult: 0}}}", {x}, ctx);
    LayerHarness reference("{" + keys + "}", {x}, ctx);
    ASSERT_EQ(h.layer->params().size(), 2u);
    for (size_t i = 0; i < 2; ++i) {
      reference.layer->params()[i].value.copy_from(h.layer->params()[i].value);
    }
    for (LayerHarness* run : {&h, &reference}) {
      run->set_bottom(0, random_input(x, seed));
      run->forward();
      const Shape& y = run->top[0]->value.shape();
      run->top[0]->grad.copy_from(Tensor::from_vector(y, random_input(y, seed + 1)));
      for (Param& p : run->layer->params()) p.grad.fill(7.0f);
      run->layer->backward(run->top, {true}, run->bottom, ctx);
    }
    const size_t frozen_index = frozen == "weight" ? 0 : 1;
    for (size_t i = 0; i < 2; ++i) {
      const std::vector<float> got = h.layer->params()[i].grad.to_vector();
      if (i == frozen_index) {
        for (float v : got) ASSERT_EQ(v, 7.0f) << "a frozen gradient was written";
      } else {
        EXPECT_EQ(got, reference.layer->params()[i].grad.to_vector());
      }
    }
    EXPECT_EQ(h.bottom[0]->grad.to_vector(), reference.bottom[0]->grad.to_vector());
  }
}

}  // namespace crema::testing
