#include "kernels/tensor_checks.h"

#include "core/error.h"

namespace crema::kernels {
namespace {

bool usable(const Context& ctx, const Tensor& t) {
  return t.defined() && t.dtype() == DType::f32 && t.device() == ctx.device();
}

std::string described(const Tensor& t) {
  return t.defined() ? t.description() : "undefined";
}

}  // namespace

void check_tensor(const Context& ctx, const std::string& op, const char* name, const Tensor& t,
                  const Shape& shape) {
  if (!usable(ctx, t) || t.shape() != shape) {
    throw Error(op + ": " + name + " is " + described(t) + ", expected f32" + shape_str(shape) +
                " on " + ctx.device().str());
  }
}

void check_scalar(const Context& ctx, const std::string& op, const char* name, const Tensor& t) {
  if (!usable(ctx, t) || t.numel() != 1) {
    throw Error(op + ": " + name + " is " + described(t) +
                ", expected an f32 tensor of one element on " + ctx.device().str());
  }
}

}  // namespace crema::kernels
