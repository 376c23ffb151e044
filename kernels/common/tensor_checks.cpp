#include "kernels/common/tensor_checks.h"

#include <string>

#include "core/error.h"

namespace crema::kernels {
namespace {

bool usable(const Context& ctx, const Tensor& t, DType dtype) {
  return t.defined() && t.dtype() == dtype && t.device() == ctx.device();
}

std::string described(const Tensor& t) {
  return t.defined() ? t.description() : "undefined";
}

}  // namespace

void check_tensor(const Context& ctx, const std::string& op, const char* name, const Tensor& t,
                  const Shape& shape, DType dtype) {
  if (!usable(ctx, t, dtype) || t.shape() != shape) {
    throw Error(op + ": " + name + " is " + described(t) + ", expected " + dtype_name(dtype) +
                shape_str(shape) + " on " + ctx.device().str());
  }
}

void check_tensors(const Context& ctx, const std::string& op, const Shape& shape, DType dtype,
                   std::initializer_list<NamedTensor> tensors) {
  for (const NamedTensor& t : tensors) check_tensor(ctx, op, t.name, t.tensor, shape, dtype);
}

void check_layout(const std::string& op, const char* name, const Tensor& t, Layout layout) {
  if (t.defined() && t.ndim() == 4 && t.layout() != layout) {
    throw Error(op + ": " + name + " is " + t.description() + ", expected " + layout_name(layout) +
                " (the layout of the op's other tensors)");
  }
}

void check_numel(const Context& ctx, const std::string& op, const char* name, const Tensor& t,
                 int64_t numel, const std::string& per, DType dtype) {
  if (!usable(ctx, t, dtype) || t.numel() != numel) {
    throw Error(op + ": " + name + " is " + described(t) + ", expected " + dtype_name(dtype) +
                " with " + std::to_string(numel) + " elements (one per " + per + ") on " +
                ctx.device().str());
  }
}

void check_scalar(const Context& ctx, const std::string& op, const char* name, const Tensor& t,
                  DType dtype) {
  if (!usable(ctx, t, dtype) || t.numel() != 1) {
    throw Error(op + ": " + name + " is " + described(t) + ", expected an " + dtype_name(dtype) +
                " tensor of one element on " + ctx.device().str());
  }
}

}  // namespace crema::kernels
