// Pointwise losses, dispatch: checks the tensors once, then runs the path for the device and dtype
// (float32: cpu:: or cuda::; float64 on the CPU: the reference, normalized here, for gradient
// checks).
#include "kernels/loss/loss.h"

#include <algorithm>
#include <string>

#include "core/error.h"
#include "kernels/common/dispatch.h"
#include "kernels/common/tensor_checks.h"
#include "kernels/common/workspace.h"

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

// The device scratch of the CUDA losses (block partials, target counts). Generic in the stream,
// as the CUDA lambdas are, so that only a CUDA build compiles it.
template <class Stream>
void* loss_workspace(Context& ctx, int64_t n, Stream) {
  return workspace_for(ctx, cuda::pointwise_loss_workspace_bytes(n));
}

// The float64 backward's count of the targets not ignored (the reference's test), on the host.
int64_t counted_targets(int64_t n, const double* t, const SigmoidCrossEntropyOptions& options) {
  int64_t counted = 0;
  for (int64_t k = 0; k < n; ++k) {
    counted += options.has_ignore_label && t[k] == double(options.ignore_label) ? 0 : 1;
  }
  return counted;
}

// An optional gradient's data: null where it is not wanted.
template <class T>
T* data_or_null(Tensor* t) {
  return t != nullptr ? t->data<T>() : nullptr;
}

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
  const DType dtype = x.dtype();
  check_tensor(ctx, op, "x", x, x.shape(), dtype);
  check_numel(ctx, op, "targets", targets, x.numel(), "element of x", dtype);
  check_scalar(ctx, op, "loss", loss, dtype);
  const Extents e = extents(x);
  dispatch(ctx, op.c_str(), dtype,
           on_cuda(DType::f32,
                   [&](auto stream) {
                     cuda::sigmoid_cross_entropy_forward(
                         e.outer, e.inner, x.data<float>(), targets.data<float>(), options,
                         loss.data<float>(), loss_workspace(ctx, x.numel(), stream), stream);
                   }),
           on_cpu(DType::f32,
                  [&] {
                    cpu::sigmoid_cross_entropy_forward(e.outer, e.inner, x.data<float>(),
                                                       targets.data<float>(), options,
                                                       loss.data<float>(), ctx.num_threads());
                  }),
           on_cpu(DType::f64, [&] {
             int64_t counted = 0;
             const double sum = ref::sigmoid_cross_entropy_forward(
                 x.numel(), x.data<double>(), targets.data<double>(), options, &counted);
             loss.data<double>()[0] =
                 sum / double(loss_normalizer(options.normalization, e.outer, e.inner, counted));
           }));
}

void sigmoid_cross_entropy_backward(Context& ctx, const Tensor& x, const Tensor& targets,
                                    const Tensor& top_grad,
                                    const SigmoidCrossEntropyOptions& options, Tensor& dx) {
  const std::string op = "sigmoid_cross_entropy_backward";
  const DType dtype = x.dtype();
  check_tensor(ctx, op, "x", x, x.shape(), dtype);
  check_numel(ctx, op, "targets", targets, x.numel(), "element of x", dtype);
  check_scalar(ctx, op, "top_grad", top_grad, dtype);
  check_tensor(ctx, op, "dx", dx, x.shape(), dtype);
  const Extents e = extents(x);
  dispatch(ctx, op.c_str(), dtype,
           on_cuda(DType::f32,
                   [&](auto stream) {
                     cuda::sigmoid_cross_entropy_backward(
                         e.outer, e.inner, x.data<float>(), targets.data<float>(),
                         top_grad.data<float>(), options, dx.data<float>(),
                         loss_workspace(ctx, x.numel(), stream), stream);
                   }),
           on_cpu(DType::f32,
                  [&] {
                    cpu::sigmoid_cross_entropy_backward(
                        e.outer, e.inner, x.data<float>(), targets.data<float>(),
                        top_grad.data<float>(), options, dx.data<float>(), ctx.num_threads());
                  }),
           on_cpu(DType::f64, [&] {
             const int64_t counted = counted_targets(x.numel(), targets.data<double>(), options);
             const double scale =
                 top_grad.data<double>()[0] /
                 double(loss_normalizer(options.normalization, e.outer, e.inner, counted));
             ref::sigmoid_cross_entropy_backward(x.numel(), x.data<double>(),
                                                 targets.data<double>(), options, scale,
                                                 dx.data<double>());
           }));
}

void euclidean_loss_forward(Context& ctx, const Tensor& a, const Tensor& b, Tensor& loss,
                            LossNormalization normalization) {
  const std::string op = "euclidean_loss_forward";
  const DType dtype = a.dtype();
  check_tensor(ctx, op, "a", a, a.shape(), dtype);
  check_numel(ctx, op, "b", b, a.numel(), "element of a", dtype);
  check_scalar(ctx, op, "loss", loss, dtype);
  const Extents e = extents(a);
  dispatch(ctx, op.c_str(), dtype,
           on_cuda(DType::f32,
                   [&](auto stream) {
                     cuda::euclidean_loss_forward(
                         e.outer, e.inner, a.data<float>(), b.data<float>(), normalization,
                         loss.data<float>(), loss_workspace(ctx, a.numel(), stream), stream);
                   }),
           on_cpu(DType::f32,
                  [&] {
                    cpu::euclidean_loss_forward(e.outer, e.inner, a.data<float>(), b.data<float>(),
                                                normalization, loss.data<float>(),
                                                ctx.num_threads());
                  }),
           on_cpu(DType::f64, [&] {
             const double sum =
                 ref::euclidean_loss_forward(a.numel(), a.data<double>(), b.data<double>());
             const int64_t normalizer = loss_normalizer(normalization, e.outer, e.inner, a.numel());
             loss.data<double>()[0] = sum / (2.0 * double(normalizer));
           }));
}

void euclidean_loss_backward(Context& ctx, const Tensor& a, const Tensor& b, const Tensor& top_grad,
                             LossNormalization normalization, Tensor* da, Tensor* db) {
  const std::string op = "euclidean_loss_backward";
  const DType dtype = a.dtype();
  check_tensor(ctx, op, "a", a, a.shape(), dtype);
  check_numel(ctx, op, "b", b, a.numel(), "element of a", dtype);
  check_scalar(ctx, op, "top_grad", top_grad, dtype);
  if (da != nullptr) check_tensor(ctx, op, "da", *da, a.shape(), dtype);
  if (db != nullptr) check_tensor(ctx, op, "db", *db, b.shape(), dtype);
  if (da == nullptr && db == nullptr) return;
  const Extents e = extents(a);
  dispatch(ctx, op.c_str(), dtype,
           on_cuda(DType::f32,
                   [&](auto stream) {
                     cuda::euclidean_loss_backward(
                         e.outer, e.inner, a.data<float>(), b.data<float>(), top_grad.data<float>(),
                         normalization, data_or_null<float>(da), data_or_null<float>(db), stream);
                   }),
           on_cpu(DType::f32,
                  [&] {
                    cpu::euclidean_loss_backward(e.outer, e.inner, a.data<float>(), b.data<float>(),
                                                 top_grad.data<float>(), normalization,
                                                 data_or_null<float>(da), data_or_null<float>(db),
                                                 ctx.num_threads());
                  }),
           on_cpu(DType::f64, [&] {
             const int64_t normalizer = loss_normalizer(normalization, e.outer, e.inner, a.numel());
             ref::euclidean_loss_backward(a.numel(), a.data<double>(), b.data<double>(),
                                          top_grad.data<double>()[0] / double(normalizer),
                                          data_or_null<double>(da), data_or_null<double>(db));
           }));
}

}  // namespace crema::kernels
