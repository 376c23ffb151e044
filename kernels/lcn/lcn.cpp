// Divisive / local contrast normalization, dispatch: checks the tensors and the window once, then
// runs the path for the device and dtype (f32: cpu:: or cuda::, scratch from ctx.workspace();
// f64 on the CPU: the reference).
#include "kernels/lcn/lcn.h"

#include <string>
#include <utility>

#include "core/error.h"
#include "kernels/common/dispatch.h"
#include "kernels/common/tensor_checks.h"

namespace crema::kernels {
namespace {

LcnShape shape_of(const std::string& op, const LcnParams& p, const Tensor& x) {
  if (!x.defined() || x.ndim() != 4) {
    throw Error(op + ": x is " + (x.defined() ? x.description() : std::string("undefined")) +
                ", expected 4 axes [N, C, H, W]");
  }
  if (p.local_size <= 0 || p.local_size % 2 == 0) {
    throw Error(op + ": local_size " + std::to_string(p.local_size) + " must be odd and positive");
  }
  if (!(p.k > 0.0) || !(p.alpha >= 0.0)) {
    throw Error(op + ": k " + std::to_string(p.k) + " must be positive and alpha " +
                std::to_string(p.alpha) + " non-negative (the denominator must stay positive)");
  }
  return {x.dim(0), x.dim(1), x.dim(2), x.dim(3)};
}

// Windows read neighbours: no output may share an input's storage.
void check_outputs_apart(const std::string& op,
                         std::initializer_list<std::pair<const char*, const Tensor*>> outputs,
                         std::initializer_list<std::pair<const char*, const Tensor*>> inputs) {
  for (const auto& [out_name, out] : outputs) {
    if (!out->defined()) continue;
    for (const auto& [in_name, in] : inputs) {
      if (in->defined() && out->shares_storage(*in)) {
        throw Error(op + ": " + out_name + " shares storage with " + in_name +
                    ", which it may not (the windows read neighbours)");
      }
    }
  }
}

// The optional tensors (means, dmeans): x's shape and dtype when given.
void check_optional(Context& ctx, const std::string& op, const char* name, const Tensor& t,
                    const Tensor& x) {
  if (t.defined()) check_tensor(ctx, op, name, t, x.shape(), x.dtype());
}

template <class T>
const T* optional_data(const Tensor& t) {
  return t.defined() ? t.data<T>() : nullptr;
}
template <class T>
T* optional_data(Tensor& t) {
  return t.defined() ? t.data<T>() : nullptr;
}

}  // namespace

void divnorm_forward(Context& ctx, const LcnParams& p, double alpha, const Tensor& x,
                     const Tensor& means, double beta, Tensor& y) {
  const std::string op = "divnorm_forward";
  const LcnShape s = shape_of(op, p, x);
  const DType dtype = x.dtype();
  check_tensors(ctx, op, x.shape(), dtype, {{"x", x}, {"y", y}});
  check_optional(ctx, op, "means", means, x);
  check_outputs_apart(op, {{"y", &y}}, {{"x", &x}, {"means", &means}});
  dispatch(ctx, op.c_str(), dtype,
           on_cuda(DType::f32,
                   [&](auto stream) {
                     cuda::divnorm_forward(s, p, float(alpha), x.data<float>(),
                                           optional_data<float>(means), float(beta),
                                           y.data<float>(), stream);
                   }),
           on_cpu(DType::f32,
                  [&] {
                    cpu::divnorm_forward(s, p, float(alpha), x.data<float>(),
                                         optional_data<float>(means), float(beta), y.data<float>(),
                                         ctx.num_threads());
                  }),
           on_cpu(DType::f64, [&] {
             ref::divnorm_forward(s, p, alpha, x.data<double>(), optional_data<double>(means), beta,
                                  y.data<double>());
           }));
}

void divnorm_backward(Context& ctx, const LcnParams& p, double alpha, const Tensor& x,
                      const Tensor& means, const Tensor& dy, double beta, Tensor& dx,
                      Tensor& dmeans) {
  const std::string op = "divnorm_backward";
  const LcnShape s = shape_of(op, p, x);
  const DType dtype = x.dtype();
  check_tensors(ctx, op, x.shape(), dtype, {{"x", x}, {"dy", dy}, {"dx", dx}});
  check_optional(ctx, op, "means", means, x);
  check_optional(ctx, op, "dmeans", dmeans, x);
  check_outputs_apart(op, {{"dx", &dx}, {"dmeans", &dmeans}},
                      {{"x", &x}, {"means", &means}, {"dy", &dy}});
  if (dmeans.defined() && dmeans.shares_storage(dx)) {
    throw Error(op + ": dmeans shares storage with dx");
  }
  dispatch(ctx, op.c_str(), dtype,
           on_cuda(DType::f32,
                   [&](auto stream) {
                     float* scratch = ctx.workspace(size_t(kDivnormBackwardScratch * s.numel()));
                     cuda::divnorm_backward(s, p, float(alpha), x.data<float>(),
                                            optional_data<float>(means), dy.data<float>(),
                                            float(beta), dx.data<float>(),
                                            optional_data<float>(dmeans), scratch, stream);
                   }),
           on_cpu(DType::f32,
                  [&] {
                    float* scratch = ctx.workspace(size_t(kDivnormBackwardScratch * s.numel()));
                    cpu::divnorm_backward(s, p, float(alpha), x.data<float>(),
                                          optional_data<float>(means), dy.data<float>(),
                                          float(beta), dx.data<float>(),
                                          optional_data<float>(dmeans), scratch, ctx.num_threads());
                  }),
           on_cpu(DType::f64, [&] {
             ref::divnorm_backward(s, p, alpha, x.data<double>(), optional_data<double>(means),
                                   dy.data<double>(), beta, dx.data<double>(),
                                   optional_data<double>(dmeans));
           }));
}

void lcn_forward(Context& ctx, const LcnParams& p, double alpha, const Tensor& x, double beta,
                 Tensor& y) {
  const std::string op = "lcn_forward";
  const LcnShape s = shape_of(op, p, x);
  const DType dtype = x.dtype();
  check_tensors(ctx, op, x.shape(), dtype, {{"x", x}, {"y", y}});
  check_outputs_apart(op, {{"y", &y}}, {{"x", &x}});
  dispatch(ctx, op.c_str(), dtype,
           on_cuda(DType::f32,
                   [&](auto stream) {
                     float* scratch = ctx.workspace(size_t(kLcnForwardScratch * s.numel()));
                     cuda::lcn_forward(s, p, float(alpha), x.data<float>(), float(beta),
                                       y.data<float>(), scratch, stream);
                   }),
           on_cpu(DType::f32,
                  [&] {
                    float* scratch = ctx.workspace(size_t(kLcnForwardScratch * s.numel()));
                    cpu::lcn_forward(s, p, float(alpha), x.data<float>(), float(beta),
                                     y.data<float>(), scratch, ctx.num_threads());
                  }),
           on_cpu(DType::f64, [&] {
             ref::lcn_forward(s, p, alpha, x.data<double>(), beta, y.data<double>());
           }));
}

void lcn_backward(Context& ctx, const LcnParams& p, double alpha, const Tensor& x, const Tensor& dy,
                  double beta, Tensor& dx) {
  const std::string op = "lcn_backward";
  const LcnShape s = shape_of(op, p, x);
  const DType dtype = x.dtype();
  check_tensors(ctx, op, x.shape(), dtype, {{"x", x}, {"dy", dy}, {"dx", dx}});
  check_outputs_apart(op, {{"dx", &dx}}, {{"x", &x}, {"dy", &dy}});
  dispatch(ctx, op.c_str(), dtype,
           on_cuda(DType::f32,
                   [&](auto stream) {
                     float* scratch = ctx.workspace(size_t(kLcnBackwardScratch * s.numel()));
                     cuda::lcn_backward(s, p, float(alpha), x.data<float>(), dy.data<float>(),
                                        float(beta), dx.data<float>(), scratch, stream);
                   }),
           on_cpu(DType::f32,
                  [&] {
                    float* scratch = ctx.workspace(size_t(kLcnBackwardScratch * s.numel()));
                    cpu::lcn_backward(s, p, float(alpha), x.data<float>(), dy.data<float>(),
                                      float(beta), dx.data<float>(), scratch, ctx.num_threads());
                  }),
           on_cpu(DType::f64, [&] {
             ref::lcn_backward(s, p, alpha, x.data<double>(), dy.data<double>(), beta,
                               dx.data<double>());
           }));
}

}  // namespace crema::kernels
