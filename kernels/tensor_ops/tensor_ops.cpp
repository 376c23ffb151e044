// Tensor ops, dispatch: checks the tensors once, builds the index plan (extent-1 axes dropped,
// neighbours that stay contiguous merged), then runs the path for the device and dtype (f32:
// cpu:: or cuda::; f64 on the CPU: the reference).
#include "kernels/tensor_ops/tensor_ops.h"

#include <algorithm>
#include <string>

#include "core/error.h"
#include "kernels/common/dispatch.h"
#include "kernels/common/tensor_checks.h"
#include "kernels/common/workspace.h"
#include "kernels/layout/layout.h"

namespace crema::kernels {
namespace {

// Largest reduction whose indices a float holds exactly.
constexpr int64_t kMaxIndexedCount = int64_t(1) << 24;

// Axes (extent, stride) with extent-1 axes dropped and axis k merged into k+1 when
// stride[k] == stride[k+1] * extent[k+1] (0 == 0 * n for broadcast runs): one axis at least.
IndexMap merged(const Shape& shape, const std::vector<int64_t>& stride) {
  IndexMap m;
  for (size_t k = 0; k < shape.size(); ++k) {
    if (shape[k] == 1) continue;
    const int last = m.ndim - 1;
    if (last >= 0 && m.stride[last] == stride[k] * shape[k]) {
      m.shape[last] *= shape[k];
      m.stride[last] = stride[k];
    } else {
      m.shape[m.ndim] = shape[k];
      m.stride[m.ndim] = stride[k];
      ++m.ndim;
    }
  }
  if (m.ndim == 0) {
    m.ndim = 1;
    m.shape[0] = 1;
    m.stride[0] = 0;
  }
  return m;
}

std::vector<int64_t> contiguous_strides(const Shape& shape) {
  std::vector<int64_t> stride(shape.size());
  int64_t s = 1;
  for (size_t k = shape.size(); k-- > 0;) {
    stride[k] = s;
    s *= shape[k];
  }
  return stride;
}

void check_rank(const std::string& op, const char* name, const Tensor& t) {
  if (!t.defined()) throw Error(op + ": " + name + " is undefined");
  if (t.ndim() > kMaxTensorOpDims) {
    throw Error(op + ": " + name + " is " + t.description() + ", more than " +
                std::to_string(kMaxTensorOpDims) + " axes");
  }
}

void check_distinct(const std::string& op, const char* out_name, const Tensor& out,
                    const char* in_name, const Tensor& in) {
  if (out.shares_storage(in)) {
    throw Error(op + ": " + out_name + " shares storage with " + in_name +
                ", which it may not (elements are read at other positions than written)");
  }
}

}  // namespace

const char* op_tensor_op_name(OpTensorOp op) {
  switch (op) {
    case OpTensorOp::add:
      return "add";
    case OpTensorOp::mul:
      return "mul";
    case OpTensorOp::min:
      return "min";
    case OpTensorOp::max:
      return "max";
    case OpTensorOp::sqrt:
      return "sqrt";
    case OpTensorOp::logical_not:
      return "logical_not";
  }
  return "?";
}

const char* reduce_op_name(ReduceOp op) {
  switch (op) {
    case ReduceOp::sum:
      return "sum";
    case ReduceOp::mul:
      return "mul";
    case ReduceOp::max:
      return "max";
    case ReduceOp::min:
      return "min";
    case ReduceOp::amax:
      return "amax";
    case ReduceOp::avg:
      return "avg";
    case ReduceOp::norm1:
      return "norm1";
    case ReduceOp::norm2:
      return "norm2";
    case ReduceOp::mul_no_zeros:
      return "mul_no_zeros";
  }
  return "?";
}

BroadcastPlan make_broadcast_plan(const Shape& c_shape, const Shape& b_shape) {
  std::vector<int64_t> stride = contiguous_strides(b_shape);
  for (size_t k = 0; k < c_shape.size(); ++k) {
    if (b_shape[k] == 1) stride[k] = 0;
  }
  return {merged(c_shape, stride), shape_numel(c_shape)};
}

ReducePlan make_reduce_plan(const Shape& x_shape, const Shape& y_shape) {
  const std::vector<int64_t> stride = contiguous_strides(x_shape);
  Shape kept = x_shape, reduced = x_shape;
  for (size_t k = 0; k < x_shape.size(); ++k) {
    (y_shape[k] == x_shape[k] ? reduced : kept)[k] = 1;
  }
  return {merged(kept, stride), merged(reduced, stride), shape_numel(kept), shape_numel(reduced)};
}

IndexMap make_permute_map(const Shape& x_shape, const std::vector<int>& order) {
  const PermutePlan plan = simplify_permutation(x_shape, order);
  const std::vector<int64_t> x_stride = contiguous_strides(plan.shape);
  Shape y_shape;
  std::vector<int64_t> stride;
  for (int a : plan.order) {
    y_shape.push_back(plan.shape[size_t(a)]);
    stride.push_back(x_stride[size_t(a)]);
  }
  return merged(y_shape, stride);
}

StridedPlan make_strided_plan(const Shape& shape, const std::vector<int64_t>& x_stride,
                              const std::vector<int64_t>& y_stride) {
  std::vector<size_t> axes;
  for (size_t k = 0; k < shape.size(); ++k) {
    if (shape[k] != 1) axes.push_back(k);
  }
  // Largest y stride first: the walk's last axis is y's innermost. Ties keep their order.
  std::stable_sort(axes.begin(), axes.end(),
                   [&](size_t a, size_t b) { return y_stride[a] > y_stride[b]; });
  StridedPlan plan;
  plan.count = shape_numel(shape);
  IndexMap& mx = plan.x;
  IndexMap& my = plan.y;
  for (size_t k : axes) {
    const int last = my.ndim - 1;
    if (last >= 0 && mx.stride[last] == x_stride[k] * shape[k] &&
        my.stride[last] == y_stride[k] * shape[k]) {
      mx.shape[last] = my.shape[last] *= shape[k];
      mx.stride[last] = x_stride[k];
      my.stride[last] = y_stride[k];
    } else {
      mx.shape[mx.ndim] = my.shape[my.ndim] = shape[k];
      mx.stride[mx.ndim++] = x_stride[k];
      my.stride[my.ndim++] = y_stride[k];
    }
  }
  if (my.ndim == 0) {
    mx.ndim = my.ndim = 1;
    mx.shape[0] = my.shape[0] = 1;
  }
  return plan;
}

void op_tensor(Context& ctx, OpTensorOp op, double alpha1, const Tensor& a, double alpha2,
               const Tensor& b, double beta, Tensor& c) {
  const std::string name = std::string("op_tensor ") + op_tensor_op_name(op);
  const bool unary = detail::op_tensor_unary(op);
  check_rank(name, "c", c);
  const DType dtype = c.dtype();
  check_tensor(ctx, name, "c", c, c.shape(), dtype);
  check_tensor(ctx, name, "a", a, c.shape(), dtype);
  Shape b_shape(c.shape().size(), 1);
  if (!unary) {
    check_rank(name, "b", b);
    bool broadcastable = b.ndim() == c.ndim();
    for (int k = 0; broadcastable && k < c.ndim(); ++k) {
      broadcastable = b.dim(k) == c.dim(k) || b.dim(k) == 1;
    }
    if (!broadcastable) {
      throw Error(name + ": b is " + b.description() +
                  ", expected c's rank with each extent c's (" + shape_str(c.shape()) + ") or 1");
    }
    check_tensor(ctx, name, "b", b, b.shape(), dtype);
    b_shape = b.shape();
    if (b_shape != c.shape()) check_distinct(name, "c", c, "b (broadcast)", b);
  }
  const BroadcastPlan plan = make_broadcast_plan(c.shape(), b_shape);
  dispatch(ctx, name.c_str(), dtype,
           on_cuda(DType::f32,
                   [&](auto stream) {
                     cuda::op_tensor(op, plan, float(alpha1), a.data<float>(), float(alpha2),
                                     unary ? nullptr : b.data<float>(), float(beta),
                                     c.data<float>(), cuda::OpTensorVersion::best, stream);
                   }),
           on_cpu(DType::f32,
                  [&] {
                    cpu::op_tensor(op, plan, float(alpha1), a.data<float>(), float(alpha2),
                                   unary ? nullptr : b.data<float>(), float(beta), c.data<float>(),
                                   ctx.num_threads());
                  }),
           on_cpu(DType::f64, [&] {
             ref::op_tensor<double>(op, c.ndim(), c.shape().data(), b_shape.data(), alpha1,
                                    a.data<double>(), alpha2, unary ? nullptr : b.data<double>(),
                                    beta, c.data<double>());
           }));
}

void reduce_tensor(Context& ctx, ReduceOp op, double alpha, const Tensor& x, double beta, Tensor& y,
                   Tensor* indices) {
  const std::string name = std::string("reduce_tensor ") + reduce_op_name(op);
  check_rank(name, "x", x);
  check_rank(name, "y", y);
  const DType dtype = x.dtype();
  bool reducible = y.ndim() == x.ndim();
  for (int k = 0; reducible && k < x.ndim(); ++k) {
    reducible = y.dim(k) == x.dim(k) || y.dim(k) == 1;
  }
  if (!reducible) {
    throw Error(name + ": y is " + y.description() + ", expected x's rank with each extent x's (" +
                shape_str(x.shape()) + ") or 1 (reduced)");
  }
  check_tensor(ctx, name, "x", x, x.shape(), dtype);
  check_tensor(ctx, name, "y", y, y.shape(), dtype);
  check_distinct(name, "y", y, "x", x);
  const ReducePlan plan = make_reduce_plan(x.shape(), y.shape());
  if (indices != nullptr) {
    if (!detail::reduce_has_indices(op)) {
      throw Error(name + ": indices are given, but only max, min and amax have them");
    }
    check_tensor(ctx, name, "indices", *indices, y.shape(), dtype);
    check_distinct(name, "indices", *indices, "x", x);
    check_distinct(name, "indices", *indices, "y", y);
    if (plan.reduced_count > kMaxIndexedCount) {
      throw Error(name + ": reducing " + std::to_string(plan.reduced_count) +
                  " elements per output, more than a float index holds exactly (2^24)");
    }
  }
  dispatch(ctx, name.c_str(), dtype,
           on_cuda(DType::f32,
                   [&](auto stream) {
                     const auto version = cuda::ReduceTensorVersion::best;
                     void* workspace =
                         workspace_for(ctx, cuda::reduce_tensor_workspace_bytes(plan, version));
                     cuda::reduce_tensor(
                         op, plan, float(alpha), x.data<float>(), float(beta), y.data<float>(),
                         indices ? indices->data<float>() : nullptr, workspace, version, stream);
                   }),
           on_cpu(DType::f32,
                  [&] {
                    cpu::reduce_tensor(op, plan, float(alpha), x.data<float>(), float(beta),
                                       y.data<float>(), indices ? indices->data<float>() : nullptr,
                                       ctx.num_threads());
                  }),
           on_cpu(DType::f64, [&] {
             ref::reduce_tensor<double>(op, x.ndim(), x.shape().data(), y.shape().data(), alpha,
                                        x.data<double>(), beta, y.data<double>(),
                                        indices ? indices->data<double>() : nullptr);
           }));
}

void transform_tensor(Context& ctx, double alpha, const Tensor& x, const std::vector<int>& order,
                      double beta, Tensor& y) {
  const std::string name = "transform_tensor";
  check_rank(name, "x", x);
  check_tensor(ctx, name, "x", x, x.shape(), x.dtype());
  check_tensor(ctx, name, "y", y, permuted_shape(x.shape(), order), y.dtype());
  check_distinct(name, "y", y, "x", x);
  if (x.numel() == 0) return;
  const int ndim = x.ndim();
  if (x.dtype() != y.dtype()) {
    // A dtype change has only the reference, on the CPU (f32 <-> f64).
    const bool cpu_pair = ctx.device().is_cpu() &&
                          (x.dtype() == DType::f32 || x.dtype() == DType::f64) &&
                          (y.dtype() == DType::f32 || y.dtype() == DType::f64);
    if (!cpu_pair) {
      throw Error(name + ": x is " + x.description() + " and y is " + y.description() +
                  "; a dtype change exists between f32 and f64 on the cpu only");
    }
    if (x.dtype() == DType::f32) {
      ref::transform_tensor<float, double>(ndim, x.shape().data(), order.data(), alpha,
                                           x.data<float>(), beta, y.data<double>());
    } else {
      ref::transform_tensor<double, float>(ndim, x.shape().data(), order.data(), float(alpha),
                                           x.data<double>(), float(beta), y.data<float>());
    }
    return;
  }
  const IndexMap map = make_permute_map(x.shape(), order);
  dispatch(ctx, name.c_str(), x.dtype(),
           on_cuda(DType::f32,
                   [&](auto stream) {
                     cuda::transform_tensor(map, x.numel(), float(alpha), x.data<float>(),
                                            float(beta), y.data<float>(),
                                            cuda::TransformVersion::best, stream);
                   }),
           on_cpu(DType::f32,
                  [&] {
                    cpu::transform_tensor(map, float(alpha), x.data<float>(), float(beta),
                                          y.data<float>(), ctx.num_threads());
                  }),
           on_cpu(DType::f64, [&] {
             ref::transform_tensor<double, double>(ndim, x.shape().data(), order.data(), alpha,
                                                   x.data<double>(), beta, y.data<double>());
           }));
}

void set_tensor(Context& ctx, Tensor& y, double value) {
  check_tensor(ctx, "set_tensor", "y", y, y.shape(), y.dtype());
  dispatch(
      ctx, "set_tensor", y.dtype(),
      on_cuda(
          DType::f32,
          [&](auto stream) { cuda::set_tensor(y.numel(), float(value), y.data<float>(), stream); }),
      on_cpu(DType::f32,
             [&] { cpu::set_tensor(y.numel(), float(value), y.data<float>(), ctx.num_threads()); }),
      on_cpu(DType::f64, [&] { ref::set_tensor(y.numel(), value, y.data<double>()); }));
}

void scale_tensor(Context& ctx, Tensor& y, double alpha) {
  check_tensor(ctx, "scale_tensor", "y", y, y.shape(), y.dtype());
  dispatch(ctx, "scale_tensor", y.dtype(),
           on_cuda(DType::f32,
                   [&](auto stream) {
                     cuda::scale_tensor(y.numel(), float(alpha), y.data<float>(), stream);
                   }),
           on_cpu(DType::f32,
                  [&] {
                    cpu::scale_tensor(y.numel(), float(alpha), y.data<float>(), ctx.num_threads());
                  }),
           on_cpu(DType::f64, [&] { ref::scale_tensor(y.numel(), alpha, y.data<double>()); }));
}

}  // namespace crema::kernels

namespace crema::kernels {

void transform_strided(Context& ctx, DType dtype, const Shape& shape,
                       const std::vector<int64_t>& x_stride, const void* x,
                       const std::vector<int64_t>& y_stride, double alpha, double beta, void* y) {
  CREMA_CHECK(x_stride.size() == shape.size() && y_stride.size() == shape.size() &&
                  int(shape.size()) <= kMaxTensorOpDims,
              "transform_strided: strides do not match the shape");
  if (shape_numel(shape) == 0) return;
  const StridedPlan plan = make_strided_plan(shape, x_stride, y_stride);
  const auto xf = static_cast<const float*>(x);
  const auto yf = static_cast<float*>(y);
  dispatch(ctx, "transform_strided", dtype,
           on_cuda(DType::f32,
                   [&](auto stream) {
                     cuda::transform_strided(plan, float(alpha), xf, float(beta), yf, stream);
                   }),
           on_cpu(DType::f32,
                  [&] {
                    cpu::transform_strided(plan, float(alpha), xf, float(beta), yf,
                                           ctx.num_threads());
                  }),
           on_cpu(DType::f64, [&] {
             ref::transform_strided<double>(int(shape.size()), shape.data(), x_stride.data(),
                                            y_stride.data(), alpha, static_cast<const double*>(x),
                                            beta, static_cast<double*>(y));
           }));
}

}  // namespace crema::kernels
