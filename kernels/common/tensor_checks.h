// The checks every Tensor-level kernel function makes before it dispatches: the right dtype,
// device and shape, with a message that names the op, the tensor and what was expected.
#pragma once

#include <initializer_list>
#include <string>

#include "core/context.h"
#include "core/tensor.h"

namespace crema::kernels {

// `t` is a `dtype` tensor of `shape` on the context's device; otherwise throws crema::Error:
//   "relu_forward: y is f32[2, 3] on cpu, expected f32[2, 4] on cpu".
// An op checks every tensor against the dtype of its first input, then dispatches on that dtype
// (dispatch.h), which refuses the dtypes it has no implementation for.
void check_tensor(const Context& ctx, const std::string& op, const char* name, const Tensor& t,
                  const Shape& shape, DType dtype = DType::f32);
// One tensor of an op's call, by the name its messages give it.
struct NamedTensor {
  const char* name;
  const Tensor& tensor;
};
// check_tensor for each of `tensors`, all of one shape and dtype:
//   check_tensors(ctx, op, x.shape(), dtype, {{"x", x}, {"dy", dy}, {"dx", dx}});
void check_tensors(const Context& ctx, const std::string& op, const Shape& shape, DType dtype,
                   std::initializer_list<NamedTensor> tensors);
// `t`, when 4-D, is in `layout` (other ranks have one order and always pass); otherwise throws
// crema::Error: "concat: part 1 is f32[2, 3, 4, 5] on cpu, expected nhwc (the layout of the
// op's other tensors)". An op that reads 4-D tensors in either layout checks them all against
// its first input's.
void check_layout(const std::string& op, const char* name, const Tensor& t, Layout layout);
// `t` is a `dtype` tensor of `numel` elements, of any shape, on the context's device; `per` says
// what one element stands for: "accuracy: labels is f32[3] on cpu, expected f32 with 2 elements
// (one per position) on cpu".
void check_numel(const Context& ctx, const std::string& op, const char* name, const Tensor& t,
                 int64_t numel, const std::string& per, DType dtype = DType::f32);
// `t` is a `dtype` tensor of one element (a loss, its gradient, a sum) on the context's device.
void check_scalar(const Context& ctx, const std::string& op, const char* name, const Tensor& t,
                  DType dtype = DType::f32);

}  // namespace crema::kernels
