// SGD with momentum, dispatch: checks the tensors once, then runs the CPU path.
#include "kernels/sgd/sgd.h"

#include <string>

#include "core/error.h"

namespace crema::kernels {
namespace {

void check_tensor(const Context& ctx, const char* name, const Tensor& t, const Shape& shape) {
  if (!ctx.device().is_cpu()) {
    throw Error("sgd_momentum_update: no version for " + ctx.device().str() + " yet");
  }
  if (!t.defined() || t.dtype() != DType::f32 || t.device() != ctx.device() || t.shape() != shape) {
    throw Error(std::string("sgd_momentum_update: ") + name + " is " +
                (t.defined() ? t.description() : std::string("undefined")) + ", expected f32" +
                shape_str(shape) + " on " + ctx.device().str());
  }
}

}  // namespace

void sgd_momentum_update(Context& ctx, Tensor& w, const Tensor& g, Tensor& v, float lr,
                         float momentum, float weight_decay) {
  check_tensor(ctx, "w", w, w.shape());
  check_tensor(ctx, "g", g, w.shape());
  check_tensor(ctx, "v", v, w.shape());
  cpu::sgd_momentum_update(w.numel(), w.data<float>(), g.data<float>(), v.data<float>(), lr,
                           momentum, weight_decay, ctx.num_threads());
}

}  // namespace crema::kernels
