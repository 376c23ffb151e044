// Pointwise losses, dispatch: checks the tensors once, then runs the CPU or the CUDA path.
#include "kernels/loss/loss.h"

#include <algorithm>
#include <string>

#include "core/error.h"
#include "kernels/common/tensor_checks.h"

namespace crema::kernels {
namespace {

// [outer, inner]: outer is the first extent (1 for a scalar), inner the rest.
struct Extents {
  int64_t outer, inner;
};

Extents extents(const Tensor& t) {
  const int64_t outer = t.ndim() > 0 ? t.dim(0) : 1;
  return {outer, outer > 0 ? t.numel() / outer : 0};
}

// `second` is f32 on the context's device with as many elements as `first` (any shape).
void check_same_count(const Context& ctx, const std::string& op, const char* name,
                      const Tensor& second, const char* first_name, const Tensor& first) {
  if (!second.defined() || second.dtype() != DType::f32 || second.device() != ctx.device() ||
      second.numel() != first.numel()) {
    throw Error(op + ": " + name + " is " +
                (second.defined() ? second.description() : std::string("undefined")) +
                ", expected f32 with " + std::to_string(first.numel()) + " elements (as " +
                first_name + " " + shape_str(first.shape()) + ") on " + ctx.device().str());
  }
}

#ifdef CREMA_WITH_CUDA
void* loss_workspace(Context& ctx, int64_t n) {
  const size_t bytes = cuda::pointwise_loss_workspace_bytes(n);
  return bytes > 0 ? ctx.workspace((bytes + 3) / 4) : nullptr;
}
#endif

}  // namespace

int64_t loss_normalizer(LossNormalization normalization, int64_t outer, int64_t inner,
                        int64_t counted) {
  switch (normalization) {
    case LossNormalization::valid:
      return std::max<int64_t>(counted, 1);
    case LossNormalization::batch_size:
      return outer;
    case LossNormalization::full:
      return outer * inner;
    case LossNormalization::none:
      return 1;
  }
  return 1;
}

bool parse_loss_normalization(const std::string& name, LossNormalization& normalization) {
  if (name == "valid") {
    normalization = LossNormalization::valid;
  } else if (name == "batch_size") {
    normalization = LossNormalization::batch_size;
  } else if (name == "full") {
    normalization = LossNormalization::full;
  } else if (name == "none") {
    normalization = LossNormalization::none;
  } else {
    return false;
  }
  return true;
}

void sigmoid_cross_entropy_forward(Context& ctx, const Tensor& x, const Tensor& targets,
                                   Tensor& loss, const SigmoidCrossEntropyOptions& options) {
  const std::string op = "sigmoid_cross_entropy_forward";
  check_tensor(ctx, op, "x", x, x.shape());
  check_same_count(ctx, op, "targets", targets, "x", x);
  check_scalar(ctx, op, "loss", loss);
  const Extents e = extents(x);
#ifdef CREMA_WITH_CUDA
  if (ctx.device().is_cuda()) {
    cuda::sigmoid_cross_entropy_forward(e.outer, e.inner, x.data<float>(), targets.data<float>(),
                                        options, loss.data<float>(), loss_workspace(ctx, x.numel()),
                                        ctx.stream());
    return;
  }
#endif
  cpu::sigmoid_cross_entropy_forward(e.outer, e.inner, x.data<float>(), targets.data<float>(),
                                     options, loss.data<float>(), ctx.num_threads());
}

void sigmoid_cross_entropy_backward(Context& ctx, const Tensor& x, const Tensor& targets,
                                    const Tensor& top_grad,
                                    const SigmoidCrossEntropyOptions& options, Tensor& dx) {
  const std::string op = "sigmoid_cross_entropy_backward";
  check_tensor(ctx, op, "x", x, x.shape());
  check_same_count(ctx, op, "targets", targets, "x", x);
  check_scalar(ctx, op, "top_grad", top_grad);
  check_tensor(ctx, op, "dx", dx, x.shape());
  const Extents e = extents(x);
#ifdef CREMA_WITH_CUDA
  if (ctx.device().is_cuda()) {
    cuda::sigmoid_cross_entropy_backward(e.outer, e.inner, x.data<float>(), targets.data<float>(),
                                         top_grad.data<float>(), options, dx.data<float>(),
                                         loss_workspace(ctx, x.numel()), ctx.stream());
    return;
  }
#endif
  cpu::sigmoid_cross_entropy_backward(e.outer, e.inner, x.data<float>(), targets.data<float>(),
                                      top_grad.data<float>(), options, dx.data<float>(),
                                      ctx.num_threads());
}

void euclidean_loss_forward(Context& ctx, const Tensor& a, const Tensor& b, Tensor& loss,
                            LossNormalization normalization) {
  const std::string op = "euclidean_loss_forward";
  check_tensor(ctx, op, "a", a, a.shape());
  check_same_count(ctx, op, "b", b, "a", a);
  check_scalar(ctx, op, "loss", loss);
  const Extents e = extents(a);
#ifdef CREMA_WITH_CUDA
  if (ctx.device().is_cuda()) {
    cuda::euclidean_loss_forward(e.outer, e.inner, a.data<float>(), b.data<float>(), normalization,
                                 loss.data<float>(), loss_workspace(ctx, a.numel()), ctx.stream());
    return;
  }
#endif
  cpu::euclidean_loss_forward(e.outer, e.inner, a.data<float>(), b.data<float>(), normalization,
                              loss.data<float>(), ctx.num_threads());
}

void euclidean_loss_backward(Context& ctx, const Tensor& a, const Tensor& b, const Tensor& top_grad,
                             LossNormalization normalization, Tensor* da, Tensor* db) {
  const std::string op = "euclidean_loss_backward";
  check_tensor(ctx, op, "a", a, a.shape());
  check_same_count(ctx, op, "b", b, "a", a);
  check_scalar(ctx, op, "top_grad", top_grad);
  if (da != nullptr) check_tensor(ctx, op, "da", *da, a.shape());
  if (db != nullptr) check_tensor(ctx, op, "db", *db, b.shape());
  if (da == nullptr && db == nullptr) return;
  const Extents e = extents(a);
  float* da_data = da != nullptr ? da->data<float>() : nullptr;
  float* db_data = db != nullptr ? db->data<float>() : nullptr;
#ifdef CREMA_WITH_CUDA
  if (ctx.device().is_cuda()) {
    cuda::euclidean_loss_backward(e.outer, e.inner, a.data<float>(), b.data<float>(),
                                  top_grad.data<float>(), normalization, da_data, db_data,
                                  ctx.stream());
    return;
  }
#endif
  cpu::euclidean_loss_backward(e.outer, e.inner, a.data<float>(), b.data<float>(),
                               top_grad.data<float>(), normalization, da_data, db_data,
                               ctx.num_threads());
}

}  // namespace crema::kernels
