// Every primitive of kernels/api/primitives.h as a test case (api_test_util.h runs them): awkward
// shapes (odd extents, stride 2, padding), each activation and softmax mode, each pass.
#pragma once

#include <string>
#include <vector>

#include "tests/kernels/api_test_util.h"

namespace crema::kernels::api::testing {

inline std::vector<Case> api_cases() {
  std::vector<Case> cases;
  using In = const std::vector<TensorDesc>&;
  const Shape x4 = {2, 3, 7, 6}, w4 = {4, 3, 3, 2}, y4 = {2, 4, 4, 4};
  ConvDesc conv;
  conv.pad_h = conv.pad_w = 1;
  conv.stride_h = conv.stride_w = 2;
  cases.push_back({"convolution_forward",
                   {x4, w4},
                   y4,
                   [=](Context& ctx, double a, In in, double b, const TensorDesc& y) {
                     convolution_forward(ctx, conv, a, in[0], in[1], b, y);
                   }});
  cases.push_back({"convolution_backward_data",
                   {w4, y4},
                   x4,
                   [=](Context& ctx, double a, In in, double b, const TensorDesc& dx) {
                     convolution_backward_data(ctx, conv, a, in[0], in[1], b, dx);
                   }});
  cases.push_back({"convolution_backward_filter",
                   {x4, y4},
                   w4,
                   [=](Context& ctx, double a, In in, double b, const TensorDesc& dw) {
                     convolution_backward_filter(ctx, conv, a, in[0], in[1], b, dw);
                   }});
  cases.push_back({"convolution_backward_bias",
                   {y4},
                   {1, 4, 1, 1},
                   [=](Context& ctx, double a, In in, double b, const TensorDesc& db) {
                     convolution_backward_bias(ctx, a, in[0], b, db);
                   }});

  const Shape py = {2, 3, 4, 3};  // kernel 3, stride 2, pad 1 over 7 x 6
  for (PoolMode mode : {PoolMode::max, PoolMode::average}) {
    PoolDesc pool;
    pool.mode = mode;
    pool.kernel_h = pool.kernel_w = 3;
    pool.pad_h = pool.pad_w = 1;
    const std::string m = mode == PoolMode::max ? "max" : "average";
    cases.push_back({"pooling_forward_" + m,
                     {x4},
                     py,
                     [=](Context& ctx, double a, In in, double b, const TensorDesc& y) {
                       pooling_forward(ctx, pool, a, in[0], b, y);
                     }});
    cases.push_back({"pooling_backward_" + m,
                     {py, py, x4},
                     x4,
                     [=](Context& ctx, double a, In in, double b, const TensorDesc& dx) {
                       pooling_backward(ctx, pool, a, in[0], in[1], in[2], b, dx);
                     }});
  }

  const Shape e = {2, 3, 4, 5};
  const std::vector<std::pair<const char*, ActivationMode>> modes = {
      {"relu", ActivationMode::relu},           {"identity", ActivationMode::identity},
      {"sigmoid", ActivationMode::sigmoid},     {"tanh", ActivationMode::tanh},
      {"clip", ActivationMode::clip},           {"elu", ActivationMode::elu},
      {"swish", ActivationMode::swish},         {"gelu_erf", ActivationMode::gelu_erf},
      {"gelu_tanh", ActivationMode::gelu_tanh}, {"hardsigmoid", ActivationMode::hardsigmoid},
      {"hardswish", ActivationMode::hardswish}, {"mish", ActivationMode::mish},
      {"softsign", ActivationMode::softsign}};
  for (const auto& [name, mode] : modes) {
    ActivationDesc act;
    act.mode = mode;
    act.negative_slope = 0.125f;
    act.pointwise.min = -0.5f;
    act.pointwise.max = 0.5f;
    cases.push_back({std::string("activation_forward_") + name,
                     {e},
                     e,
                     [act](Context& ctx, double a, In in, double b, const TensorDesc& y) {
                       activation_forward(ctx, act, a, in[0], b, y);
                     }});
    cases.push_back({std::string("activation_backward_") + name,
                     {e, e, e},
                     e,
                     [act](Context& ctx, double a, In in, double b, const TensorDesc& dx) {
                       activation_backward(ctx, act, a, in[0], in[1], in[2], b, dx);
                     }});
  }

  const std::vector<std::pair<const char*, SoftmaxAlgo>> algos = {
      {"fast", SoftmaxAlgo::fast}, {"accurate", SoftmaxAlgo::accurate}, {"log", SoftmaxAlgo::log}};
  for (const auto& [aname, algo] : algos) {
    for (SoftmaxMode mode : {SoftmaxMode::instance, SoftmaxMode::channel}) {
      const std::string suffix =
          std::string(aname) + (mode == SoftmaxMode::instance ? "_instance" : "_channel");
      const SoftmaxAlgo al = algo;
      cases.push_back({"softmax_forward_" + suffix,
                       {e},
                       e,
                       [al, mode](Context& ctx, double a, In in, double b, const TensorDesc& y) {
                         softmax_forward(ctx, al, mode, a, in[0], b, y);
                       }});
      cases.push_back({"softmax_backward_" + suffix,
                       {e, e},
                       e,
                       [al, mode](Context& ctx, double a, In in, double b, const TensorDesc& dx) {
                         softmax_backward(ctx, al, mode, a, in[0], in[1], b, dx);
                       }});
    }
  }

  const Shape l = {2, 5, 4, 3};
  for (LrnRegion region : {LrnRegion::across_channels, LrnRegion::within_channel}) {
    LrnParams p;
    p.region = region;
    p.local_size = 3;
    const std::string r = region == LrnRegion::across_channels ? "across" : "within";
    cases.push_back({"lrn_forward_" + r,
                     {l},
                     l,
                     [p](Context& ctx, double a, In in, double b, const TensorDesc& y) {
                       lrn_forward(ctx, p, a, in[0], b, y);
                     }});
    cases.push_back({"lrn_backward_" + r,
                     {l, l, l},
                     l,
                     [p](Context& ctx, double a, In in, double b, const TensorDesc& dx) {
                       lrn_backward(ctx, p, a, in[0], in[1], in[2], b, dx);
                     }});
  }

  const Shape d = {2, 3, 6, 5};
  LcnParams lp;
  lp.local_size = 3;
  lp.alpha = 0.5;
  lp.k = 1.0;
  cases.push_back({"divisive_normalization_forward",
                   {d, d},
                   d,
                   [lp](Context& ctx, double a, In in, double b, const TensorDesc& y) {
                     divisive_normalization_forward(ctx, lp, a, in[0], &in[1], b, y);
                   }});
  cases.push_back({"divisive_normalization_backward_dx",
                   {d, d, d},
                   d,
                   [lp](Context& ctx, double a, In in, double b, const TensorDesc& dx) {
                     divisive_normalization_backward(ctx, lp, a, in[0], &in[1], in[2], b, dx,
                                                     nullptr);
                   }});
  // dmeans, with dx into a packed buffer of zeros beside it (both blended by the kernel at once,
  // or, when dmeans is strided, both through scratch).
  cases.push_back({"divisive_normalization_backward_dmeans",
                   {d, d, d},
                   d,
                   [lp, d](Context& ctx, double a, In in, double b, const TensorDesc& dmeans) {
                     Tensor dx = ctx.zeros(d, dmeans.dtype);
                     divisive_normalization_backward(ctx, lp, a, in[0], &in[1], in[2], b,
                                                     TensorDesc::of(dx), &dmeans);
                   }});
  cases.push_back(
      {"lcn_forward", {d}, d, [lp](Context& ctx, double a, In in, double b, const TensorDesc& y) {
         lcn_forward(ctx, lp, a, in[0], b, y);
       }});
  cases.push_back({"lcn_backward",
                   {d, d},
                   d,
                   [lp](Context& ctx, double a, In in, double b, const TensorDesc& dx) {
                     lcn_backward(ctx, lp, a, in[0], in[1], b, dx);
                   }});

  // Batch norm: x [2, 3, 4, 5]; parameters [1, 3, 1, 1] (spatial) or [1, 3, 4, 5].
  for (BatchNormMode mode : {BatchNormMode::spatial, BatchNormMode::per_activation}) {
    const bool spatial = mode == BatchNormMode::spatial;
    const Shape ps = spatial ? Shape{1, 3, 1, 1} : Shape{1, 3, 4, 5};
    const std::string m = spatial ? "_spatial" : "_per_activation";
    auto scratch = [ps](Context& ctx, DType dtype) { return ctx.empty(ps, dtype); };
    Case train{"batch_norm_forward_training" + m,
               {e, ps, ps},
               e,
               [=](Context& ctx, double a, In in, double b, const TensorDesc& y) {
                 Tensor sm = scratch(ctx, y.dtype), si = scratch(ctx, y.dtype);
                 batch_norm_forward_training(ctx, mode, a, b, in[0], y, in[1], in[2], 0.1, nullptr,
                                             nullptr, 1e-5, TensorDesc::of(sm), TensorDesc::of(si));
               }};
    train.packed = {false, true, true};
    cases.push_back(train);
    Case infer{"batch_norm_forward_inference" + m,
               {e, ps, ps, ps, ps},
               e,
               [=](Context& ctx, double a, In in, double b, const TensorDesc& y) {
                 batch_norm_forward_inference(ctx, mode, a, b, in[0], y, in[1], in[2], in[3], in[4],
                                              1e-5);
               }};
    infer.packed = {false, true, true, true, true};
    infer.positive = {false, false, false, false, true};
    cases.push_back(infer);
    // The backward's three outputs, one case each (the other two into scratch).
    for (int which = 0; which < 3; ++which) {
      const char* names[] = {"_dx", "_dgamma", "_dbias"};
      Case back{"batch_norm_backward" + m + names[which],
                {e, e, ps, ps, ps},
                which == 0 ? e : ps,
                [=](Context& ctx, double a, In in, double b, const TensorDesc& out) {
                  Tensor dx = ctx.empty(e, out.dtype), dg = scratch(ctx, out.dtype),
                         db = scratch(ctx, out.dtype);
                  const TensorDesc dxd = which == 0 ? out : TensorDesc::of(dx);
                  const TensorDesc dgd = which == 1 ? out : TensorDesc::of(dg);
                  const TensorDesc dbd = which == 2 ? out : TensorDesc::of(db);
                  const double ad = which == 0 ? a : 1.0, bd = which == 0 ? b : 0.0;
                  const double ap = which == 0 ? 1.0 : a, bp = which == 0 ? 0.0 : b;
                  batch_norm_backward(ctx, mode, ad, bd, ap, bp, in[0], in[1], dxd, in[2], dgd, dbd,
                                      in[3], in[4]);
                }};
      back.packed = {false, false, true, true, true};
      back.positive = {false, false, false, false, true};
      cases.push_back(back);
    }
  }

  cases.push_back(
      {"dropout_forward", {e}, e, [](Context& ctx, double a, In in, double b, const TensorDesc& y) {
         DropoutState s = DropoutState::create(ctx, 0.375f, 9);
         dropout_forward(ctx, s, a, in[0], b, y);
       }});
  cases.push_back({"dropout_backward",
                   {e},
                   e,
                   [](Context& ctx, double a, In in, double b, const TensorDesc& dx) {
                     const DropoutState s = DropoutState::create(ctx, 0.375f, 9);
                     dropout_backward(ctx, s, a, in[0], b, dx);
                   }});

  const Shape bc = {1, 3, 1, 5};
  // op_tensor has alpha1, alpha2 and beta but no outer alpha (as cudnnOpTensor): the harness's
  // alpha enters through them where op is homogeneous (alpha > 0): add, min, max scale both,
  // mul one, sqrt takes alpha^2. logical_not (1 - a) has no such form; its blend is beta's.
  const std::vector<std::pair<const char*, OpTensorOp>> ops = {{"add", OpTensorOp::add},
                                                               {"mul", OpTensorOp::mul},
                                                               {"min", OpTensorOp::min},
                                                               {"max", OpTensorOp::max},
                                                               {"sqrt", OpTensorOp::sqrt}};
  for (const auto& [oname, op] : ops) {
    const OpTensorOp o = op;
    Case c{std::string("op_tensor_") + oname,
           {e, bc},
           e,
           [o](Context& ctx, double a, In in, double b, const TensorDesc& y) {
             const double a1 = o == OpTensorOp::sqrt ? a * a : a;
             const double a2 = o == OpTensorOp::mul ? 1.0 : a;
             op_tensor(ctx, o, a1, in[0], a2, &in[1], b, y);
           }};
    c.positive = {o == OpTensorOp::sqrt, false};
    cases.push_back(c);
  }
  cases.push_back({"add_tensor",
                   {{1, 3, 1, 1}},
                   e,
                   [](Context& ctx, double a, In in, double b, const TensorDesc& y) {
                     add_tensor(ctx, a, in[0], b, y);
                   }});
  const std::vector<std::pair<const char*, ReduceOp>> reductions = {{"sum", ReduceOp::sum},
                                                                    {"max", ReduceOp::max},
                                                                    {"avg", ReduceOp::avg},
                                                                    {"norm2", ReduceOp::norm2},
                                                                    {"amax", ReduceOp::amax}};
  for (const auto& [rname, op] : reductions) {
    const ReduceOp r = op;
    cases.push_back({std::string("reduce_tensor_") + rname,
                     {e},
                     {2, 1, 4, 1},
                     [r](Context& ctx, double a, In in, double b, const TensorDesc& y) {
                       reduce_tensor(ctx, r, a, in[0], b, y);
                     }});
  }
  cases.push_back({"transform_tensor",
                   {e},
                   e,
                   [](Context& ctx, double a, In in, double b, const TensorDesc& y) {
                     transform_tensor(ctx, a, in[0], b, y);
                   }});
  for (int t = 0; t < 4; ++t) {
    const bool ta = t & 1, tb = t & 2;
    const Shape as = ta ? Shape{7, 5} : Shape{5, 7}, bs = tb ? Shape{6, 7} : Shape{7, 6};
    Case g{std::string("gemm_") + (ta ? "t" : "n") + (tb ? "t" : "n"),
           {as, bs},
           {5, 6},
           [ta, tb](Context& ctx, double a, In in, double b, const TensorDesc& c) {
             gemm(ctx, ta, tb, a, in[0], in[1], b, c);
           }};
    g.strided_exact = false;
    cases.push_back(g);
  }
  for (Case& c : cases) {
    const bool is_conv =
        c.name.rfind("convolution_", 0) == 0 && c.name != "convolution_backward_bias";
    const bool is_pool = c.name.rfind("pooling_", 0) == 0;
    const bool is_bn =
        c.name.rfind("batch_norm_", 0) == 0 && c.name.find("_spatial") != std::string::npos;
    c.nhwc_path = is_conv || is_pool || is_bn;
  }
  return cases;
}

}  // namespace crema::kernels::api::testing
