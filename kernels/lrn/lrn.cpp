// LRN, dispatch: checks the tensors and the window once, then runs the CPU or the CUDA path.
#include "kernels/lrn/lrn.h"

#include <string>
#include <utility>

#include "core/error.h"
#include "kernels/tensor_checks.h"

namespace crema::kernels {
namespace {

LrnShape shape_of(const std::string& op, const LrnParams& p, const Tensor& x) {
  if (!x.defined() || x.ndim() != 4) {
    throw Error(op + ": x is " + (x.defined() ? x.description() : std::string("undefined")) +
                ", expected 4 axes [N, C, H, W]");
  }
  if (p.local_size <= 0 || p.local_size % 2 == 0) {
    throw Error(op + ": local_size " + std::to_string(p.local_size) + " must be odd and positive");
  }
  return {x.dim(0), x.dim(1), x.dim(2), x.dim(3)};
}

// The kernels read neighbours' inputs after writing outputs: no output may share an input's
// storage.
void check_distinct(const std::string& op, const char* out_name, const Tensor& out,
                    const char* in_name, const Tensor& in) {
  if (out.shares_storage(in)) {
    throw Error(op + ": " + out_name + " shares storage with " + in_name +
                ", which it may not (the windows read neighbours)");
  }
}

}  // namespace

void lrn_forward(Context& ctx, const LrnParams& p, const Tensor& x, Tensor& y, Tensor& scale) {
  const std::string op = "lrn_forward";
  const LrnShape s = shape_of(op, p, x);
  check_tensor(ctx, op, "x", x, x.shape());
  check_tensor(ctx, op, "y", y, x.shape());
  check_tensor(ctx, op, "scale", scale, x.shape());
  check_distinct(op, "y", y, "x", x);
  check_distinct(op, "scale", scale, "x", x);
#ifdef CREMA_WITH_CUDA
  if (ctx.device().is_cuda()) {
    cuda::lrn_forward(s, p, x.data<float>(), y.data<float>(), scale.data<float>(),
                      cuda::LrnVersion::best, ctx.stream());
    return;
  }
#endif
  cpu::lrn_forward(s, p, x.data<float>(), y.data<float>(), scale.data<float>(), ctx.num_threads());
}

void lrn_backward(Context& ctx, const LrnParams& p, const Tensor& x, const Tensor& y,
                  const Tensor& scale, const Tensor& dy, Tensor& dx) {
  const std::string op = "lrn_backward";
  const LrnShape s = shape_of(op, p, x);
  check_tensor(ctx, op, "x", x, x.shape());
  check_tensor(ctx, op, "y", y, x.shape());
  check_tensor(ctx, op, "scale", scale, x.shape());
  check_tensor(ctx, op, "dy", dy, x.shape());
  check_tensor(ctx, op, "dx", dx, x.shape());
  for (const auto& [name, in] : {std::pair<const char*, const Tensor*>{"x", &x},
                                 {"y", &y},
                                 {"scale", &scale},
                                 {"dy", &dy}}) {
    check_distinct(op, "dx", dx, name, *in);
  }
#ifdef CREMA_WITH_CUDA
  if (ctx.device().is_cuda()) {
    cuda::lrn_backward(s, p, x.data<float>(), y.data<float>(), scale.data<float>(),
                       dy.data<float>(), dx.data<float>(), cuda::LrnVersion::best, ctx.stream());
    return;
  }
#endif
  cpu::lrn_backward(s, p, x.data<float>(), y.data<float>(), scale.data<float>(), dy.data<float>(),
                    dx.data<float>(), ctx.num_threads());
}

}  // namespace crema::kernels
