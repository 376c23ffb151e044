// What the CPU and CUDA tests of the tensor ops share: the awkward shapes, the alpha/beta cases
// every op is run with, and ref<double> on float tensors.
#pragma once

#include <string>
#include <vector>

#include "core/random.h"
#include "core/tensor.h"
#include "kernels/tensor_ops/tensor_ops.h"
#include "tests/kernels/kernel_test_util.h"

namespace crema::kernels::testing {

// Output blending: beta = 0 on a NaN-poisoned output (it must not be read), beta = 1 on a
// random output, and alpha = 0.5 with beta = 0.25.
struct Blend {
  double alpha;
  double beta;
};
inline const std::vector<Blend> kBlends = {{1.0, 0.0}, {1.0, 1.0}, {0.5, 0.25}};

inline std::string blend_str(const Blend& b) {
  return "alpha " + std::to_string(b.alpha) + " beta " + std::to_string(b.beta);
}

// The output an op starts from: NaN when beta is 0, random values otherwise.
inline Tensor prior_output(Random& rng, const Shape& shape, const Blend& blend) {
  return blend.beta == 0.0 ? poisoned(shape) : random_tensor(rng, shape);
}

// (C's shape, B's shape): broadcasts along leading, inner, alternate and all axes, a scalar-like
// B, N = 1, odd extents, a 5-D case and an extent-1 axis that is not broadcast.
struct BroadcastCase {
  Shape c;
  Shape b;
};
inline const std::vector<BroadcastCase> kBroadcastCases = {
    {{7}, {7}},
    {{7}, {1}},
    {{2, 3, 5, 7}, {2, 3, 5, 7}},
    {{2, 3, 5, 7}, {1, 3, 1, 1}},
    {{2, 3, 5, 7}, {2, 1, 5, 1}},
    {{2, 3, 5, 7}, {1, 1, 1, 7}},
    {{2, 3, 5, 7}, {2, 3, 1, 1}},
    {{2, 3, 5, 7}, {1, 1, 1, 1}},
    {{1, 17, 1, 33}, {1, 17, 1, 1}},
    {{3, 1, 4, 1, 5}, {1, 1, 4, 1, 1}},
    {{4, 65, 3}, {4, 1, 3}},
    {{8, 33, 40}, {8, 1, 40}},  // enough elements for the CPU's threads
};

// (x's shape, y's shape): reduce over one axis (first, middle, last), several, alternate, all,
// none, with extent-1 axes and odd sizes.
struct ReduceCase {
  Shape x;
  Shape y;
};
inline const std::vector<ReduceCase> kReduceCases = {
    {{13}, {1}},
    {{2, 3, 5, 7}, {1, 3, 5, 7}},
    {{2, 3, 5, 7}, {2, 1, 5, 7}},
    {{2, 3, 5, 7}, {2, 3, 5, 1}},
    {{2, 3, 5, 7}, {1, 3, 1, 1}},
    {{2, 3, 5, 7}, {2, 1, 5, 1}},
    {{2, 3, 5, 7}, {1, 1, 1, 1}},
    {{2, 3, 5, 7}, {2, 3, 5, 7}},
    {{1, 9, 1, 4}, {1, 1, 1, 4}},
    {{3, 2, 1, 4, 3}, {1, 2, 1, 1, 3}},
    {{2, 700}, {2, 1}},
    {{4, 50, 60}, {4, 1, 60}},  // enough elements for the CPU's threads
};

inline const std::vector<OpTensorOp> kOpTensorOps = {OpTensorOp::add,  OpTensorOp::mul,
                                                     OpTensorOp::min,  OpTensorOp::max,
                                                     OpTensorOp::sqrt, OpTensorOp::logical_not};
inline const std::vector<ReduceOp> kReduceOps = {
    ReduceOp::sum, ReduceOp::mul,   ReduceOp::max,   ReduceOp::min,         ReduceOp::amax,
    ReduceOp::avg, ReduceOp::norm1, ReduceOp::norm2, ReduceOp::mul_no_zeros};

// Inputs an op is well-defined on: positive for sqrt, near +-1 for the products (so that a
// product of hundreds stays a normal float), with zeros among them for mul_no_zeros.
inline Tensor op_input(Random& rng, const Shape& shape, bool positive, bool near_one) {
  if (positive) return random_tensor(rng, shape, 0.0, 2.0);
  if (!near_one) return random_tensor(rng, shape);
  std::vector<float> v = random_values(rng, shape_numel(shape), 0.95, 1.05);
  for (size_t i = 0; i < v.size(); ++i) {
    if (i % 3 == 1) v[i] = -v[i];
    if (i % 7 == 4) v[i] = 0.0f;
  }
  return Tensor::from_vector(shape, v);
}

// op-tensor runs with alpha1 = the blend's alpha and alpha2 = kAlpha2.
constexpr double kAlpha2 = 1.5;

inline std::vector<double> ref_op_tensor(OpTensorOp op, const Blend& blend, const Tensor& a,
                                         const Tensor& b, const Tensor& c) {
  const std::vector<double> ad = to_double(a), bd = to_double(b);
  std::vector<double> cd = to_double(c);
  ref::op_tensor<double>(op, a.ndim(), a.shape().data(), b.shape().data(), blend.alpha, ad.data(),
                         kAlpha2, bd.data(), blend.beta, cd.data());
  return cd;
}

// The reference reduction of x into y (returned) and its indices.
inline std::vector<double> ref_reduce(ReduceOp op, const Blend& blend, const Tensor& x,
                                      const Tensor& y, std::vector<double>* indices) {
  const std::vector<double> xd = to_double(x);
  std::vector<double> yd = to_double(y);
  if (indices) indices->assign(yd.size(), -1.0);
  ref::reduce_tensor<double>(op, x.ndim(), x.shape().data(), y.shape().data(), blend.alpha,
                             xd.data(), blend.beta, yd.data(), indices ? indices->data() : nullptr);
  return yd;
}

inline std::vector<double> ref_transform(const Blend& blend, const Tensor& x,
                                         const std::vector<int>& order, const Tensor& y) {
  const std::vector<double> xd = to_double(x);
  std::vector<double> yd = to_double(y);
  ref::transform_tensor<double, double>(x.ndim(), x.shape().data(), order.data(), blend.alpha,
                                        xd.data(), blend.beta, yd.data());
  return yd;
}

// Relative error tolerances of f32 results against ref<double>: elementwise results are one or
// two roundings (1e-6); reductions accumulate in double and round once, but their inputs and the
// blend are float (2e-6).
constexpr double kOpTensorTol = 1e-6;
constexpr double kReduceTol = 2e-6;

}  // namespace crema::kernels::testing
