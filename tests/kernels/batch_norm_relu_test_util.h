// Test support for the fused batch norm + ReLU (+ residual) kernels: one case run fused and as
// the unfused chain (batch_norm_* -> eltwise_sum -> relu_*, backward relu_backward -> axpby ->
// batch_norm_backward) on one context, every output returned as bits, so that a test can demand
// the same bits (or compare within a tolerance). A case's activations may be nhwc: they then hold
// the nchw case's logical values in channels-last order, and come back in nchw order, so that an
// nhwc run compares with the nchw run of the same case element by element.
#pragma once

#include <cstdint>
#include <cstring>
#include <map>
#include <string>
#include <vector>

#include "core/context.h"
#include "kernels/activations/relu.h"
#include "kernels/batch_norm/batch_norm.h"
#include "kernels/batch_norm/batch_norm_relu.h"
#include "kernels/elementwise/elementwise.h"
#include "kernels/elementwise/eltwise.h"
#include "tests/kernels/layout_test_util.h"
#include "tests/support/layer_harness.h"

namespace crema::testing {

struct BatchNormReluCase {
  Shape shape;
  bool residual = true;
  bool affine = true;
  bool batch_stats = true;  // training forward and backward; false: running statistics
  bool in_place = false;    // fused only: y over x (x_copy kept), dx over dy
  bool want_dx = true;
  bool want_dr = true;
  Layout layout = Layout::nchw;  // of x, r, y, dy, dx, dr (4-D shapes)
  std::string name() const {
    return shape_str(shape) + " " + layout_name(layout) + (residual ? " residual" : "") +
           (affine ? "" : " no-affine") + (batch_stats ? " batch-stats" : " running-stats") +
           (in_place ? " in-place" : "") + (want_dx ? "" : " no-dx") + (want_dr ? "" : " no-dr");
  }
};

// Every output by name ("y", "dx", "dr", "dgamma", "running_var", ...), as the bits of f32 values.
using Outputs = std::map<std::string, std::vector<uint32_t>>;

// In nchw order whatever t's layout.
inline std::vector<uint32_t> bits(const Tensor& t) {
  std::vector<float> v = t.to_vector();
  if (t.ndim() == 4 && t.layout() == Layout::nhwc) {
    Tensor host = Tensor::from_vector(t.shape(), v);
    host.set_layout(Layout::nhwc);
    v = kernels::testing::in_layout(host, Layout::nchw).to_vector();
  }
  std::vector<uint32_t> out(v.size());
  std::memcpy(out.data(), v.data(), v.size() * sizeof(float));
  return out;
}

// Runs the case fused (fused = true) or unfused on ctx's device, from inputs drawn from `seed`.
inline Outputs run_batch_norm_relu(const BatchNormReluCase& k, bool fused, Context& ctx,
                                   uint64_t seed) {
  namespace K = kernels;
  const Shape& shape = k.shape;
  const int64_t C = shape[1], count = shape_numel(shape);
  auto tensor = [&](const Shape& s, const std::vector<float>& values) {
    Tensor t = ctx.empty(s);
    set_values(t, values);
    return t;
  };
  // Inputs with a spread of signs around the ReLU's kink; some x exactly equal to a channel
  // value, so that the -0 and 0 cases of the select occur.
  // An activation: `values` in nchw order, stored in the case's layout.
  const bool nhwc = k.layout == Layout::nhwc && shape.size() == 4;
  auto activation = [&](const std::vector<float>& values) {
    Tensor host = Tensor::from_vector(shape, values);
    if (nhwc) host = kernels::testing::in_layout(host, Layout::nhwc);
    Tensor t = ctx.empty(shape);
    t.set_layout(host.layout());
    t.copy_from(host);
    return t;
  };
  auto zeros = [&] { return activation(std::vector<float>(size_t(count), 0.0f)); };
  Tensor x = activation(random_values(size_t(count), -2.0f, 2.0f, seed));
  Tensor r = activation(random_values(size_t(count), -1.0f, 1.0f, seed + 1));
  Tensor dy = activation(random_values(size_t(count), -1.0f, 1.0f, seed + 2));
  Tensor gamma = tensor({C}, random_values(size_t(C), -1.5f, 1.5f, seed + 3));
  Tensor beta = tensor({C}, random_values(size_t(C), -0.5f, 0.5f, seed + 4));
  Tensor running_mean = tensor({C}, random_values(size_t(C), -0.2f, 0.2f, seed + 5));
  Tensor running_var = tensor({C}, random_values(size_t(C), 0.5f, 1.5f, seed + 6));
  Tensor tracked = tensor({1}, {3.0f});
  Tensor save_mean = ctx.zeros({C}), save_invstd = ctx.zeros({C});
  Tensor dgamma = tensor({C}, random_values(size_t(C), -1.0f, 1.0f, seed + 7));
  Tensor dbeta = tensor({C}, random_values(size_t(C), -1.0f, 1.0f, seed + 8));
  Tensor none;
  const Tensor& res = k.residual ? r : none;
  const Tensor& g = k.affine ? gamma : none;
  const Tensor& b = k.affine ? beta : none;
  Tensor& dg = k.affine ? dgamma : none;
  Tensor& db = k.affine ? dbeta : none;
  const float eps = 1e-3f, momentum = 0.3f;
  Tensor y = zeros(), dx = zeros(), dr = zeros();
  Outputs out;
  if (fused) {
    Tensor x_copy = zeros();
    Tensor& copy = k.in_place ? x_copy : none;
    if (k.in_place) ctx.copy(y, x);
    const Tensor& input = k.in_place ? y : x;
    if (k.batch_stats) {
      K::batch_norm_relu_forward_training(ctx, input, res, g, b, eps, momentum, y, copy, save_mean,
                                          save_invstd, running_mean, running_var, tracked);
    } else {
      K::batch_norm_relu_forward_inference(ctx, input, res, g, b, running_mean, running_var, eps, y,
                                           copy, save_mean, save_invstd);
    }
    out["y"] = bits(y);
    if (k.in_place) ctx.copy(dx, dy);
    Tensor& grad_x = k.want_dx ? dx : none;
    Tensor& grad_r = k.residual && k.want_dr ? dr : none;
    // With a residual the mask comes from y (batch_norm_relu.h), without one from x.
    K::batch_norm_relu_backward(ctx, k.in_place ? x_copy : x, k.residual ? y : none,
                                k.in_place ? dx : dy, g, b, save_mean, save_invstd, k.batch_stats,
                                grad_x, grad_r, dg, db);
  } else {
    Tensor z = zeros(), v = zeros(), dv = zeros(), dz = zeros();
    if (k.batch_stats) {
      K::batch_norm_forward_training(ctx, x, g, b, eps, momentum, z, save_mean, save_invstd,
                                     running_mean, running_var, tracked);
    } else {
      K::batch_norm_forward_inference(ctx, x, g, b, running_mean, running_var, eps, z, save_mean,
                                      save_invstd);
    }
    if (k.residual) K::eltwise_sum(ctx, {&z, &r}, {1.0f, 1.0f}, v);
    K::relu_forward(ctx, k.residual ? v : z, y, 0.0f);
    out["y"] = bits(y);
    K::relu_backward(ctx, y, dy, dv, 0.0f);
    if (k.residual) {
      if (k.want_dr) K::axpby(ctx, 1.0f, dv, 0.0f, dr);
      K::axpby(ctx, 1.0f, dv, 0.0f, dz);
    }
    K::batch_norm_backward(ctx, x, k.residual ? dz : dv, g, save_mean, save_invstd, k.batch_stats,
                           k.want_dx ? dx : none, dg, db);
  }
  for (auto [name, t] : std::map<std::string, Tensor*>{{"save_mean", &save_mean},
                                                       {"save_invstd", &save_invstd},
                                                       {"running_mean", &running_mean},
                                                       {"running_var", &running_var},
                                                       {"tracked", &tracked},
                                                       {"dgamma", &dgamma},
                                                       {"dbeta", &dbeta}}) {
    out[name] = bits(*t);
  }
  if (k.want_dx) out["dx"] = bits(dx);
  if (k.residual && k.want_dr) out["dr"] = bits(dr);
  return out;
}

// The awkward cases both test files run: N = 1, C = 3, odd H and W, [N, C] features, a channel
// long enough for several GPU chunks; each form, affine or not, batch or running statistics, in
// place, without dx or dr.
inline std::vector<BatchNormReluCase> batch_norm_relu_cases() {
  std::vector<BatchNormReluCase> cases;
  for (const Shape& shape : {Shape{1, 3, 5, 7}, Shape{2, 3, 1, 1}, Shape{7, 5}, Shape{3, 4, 9, 11},
                             Shape{2, 3, 45, 47}}) {
    for (bool residual : {false, true}) {
      for (bool batch_stats : {true, false}) {
        cases.push_back({shape, residual, true, batch_stats});
      }
      cases.push_back({shape, residual, false, true});
      cases.push_back({shape, residual, true, true, true});
    }
  }
  cases.push_back({{3, 4, 5, 3}, true, true, true, false, false, true});
  cases.push_back({{3, 4, 5, 3}, true, true, true, false, true, false});
  cases.push_back({{3, 4, 5, 3}, true, true, false, false, false, true});
  cases.push_back({{3, 4, 5, 3}, false, true, false, false, false, false});
  return cases;
}

// The 4-D cases in channels-last, C = 13 (not a multiple of 8) with a channel of several
// split_rows chunks: [N*H*W, C] rows of 13, and C = 8, 64, 256 and 2048 (rows_tiled's 16-byte
// path, odd N*H*W; C = 4 above runs it in f32 with one thread per row, in place, without dx or
// dr, with fixed statistics).
inline std::vector<BatchNormReluCase> batch_norm_relu_nhwc_cases() {
  std::vector<BatchNormReluCase> cases;
  for (BatchNormReluCase k : batch_norm_relu_cases()) {
    if (k.shape.size() != 4) continue;
    k.layout = Layout::nhwc;
    cases.push_back(k);
  }
  for (bool residual : {false, true}) {
    for (const Shape& shape : {Shape{4, 13, 23, 25}, Shape{3, 64, 5, 7}, Shape{1, 256, 3, 5},
                               Shape{3, 8, 7, 9}, Shape{2, 2048, 3, 1}}) {
      BatchNormReluCase k{shape, residual};
      k.layout = Layout::nhwc;
      cases.push_back(k);
    }
  }
  return cases;
}

}  // namespace crema::testing
