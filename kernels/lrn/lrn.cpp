// LRN, dispatch: checks the tensors and the window once, then runs the path for the device and
// dtype (float32: cpu:: or cuda::; float64 on the CPU: the reference, for gradient checks).
#include "kernels/lrn/lrn.h"

#include <string>
#include <utility>

#include "core/error.h"
#include "kernels/common/dispatch.h"
#include "kernels/common/tensor_checks.h"

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
  const DType dtype = x.dtype();
  check_tensors(ctx, op, x.shape(), dtype, {{"x", x}, {"y", y}, {"scale", scale}});
  check_distinct(op, "y", y, "x", x);
  check_distinct(op, "scale", scale, "x", x);
  dispatch(ctx, op.c_str(), dtype,
           on_cuda(DType::f32,
                   [&](auto stream) {
                     cuda::lrn_forward(s, p, x.data<float>(), y.data<float>(), scale.data<float>(),
                                       cuda::LrnVersion::best, stream);
                   }),
           on_cpu(DType::f32,
                  [&] {
                    cpu::lrn_forward(s, p, x.data<float>(), y.data<float>(), scale.data<float>(),
                                     ctx.num_threads());
                  }),
           on_cpu(DType::f64, [&] {
             ref::lrn_forward(s, p, x.data<double>(), y.data<double>(), scale.data<double>());
           }));
}

void lrn_backward(Context& ctx, const LrnParams& p, const Tensor& x, const Tensor& y,
                  const Tensor& scale, const Tensor& dy, Tensor& dx) {
  const std::string op = "lrn_backward";
  const LrnShape s = shape_of(op, p, x);
  const DType dtype = x.dtype();
  check_tensors(ctx, op, x.shape(), dtype,
                {{"x", x}, {"y", y}, {"scale", scale}, {"dy", dy}, {"dx", dx}});
  for (const auto& [name, in] : {std::pair<const char*, const Tensor*>{"x", &x},
                                 {"y", &y},
                                 {"scale", &scale},
                                 {"dy", &dy}}) {
    check_distinct(op, "dx", dx, name, *in);
  }
  dispatch(ctx, op.c_str(), dtype,
           on_cuda(DType::f32,
                   [&](auto stream) {
                     cuda::lrn_backward(s, p, x.data<float>(), y.data<float>(), scale.data<float>(),
                                        dy.data<float>(), dx.data<float>(), cuda::LrnVersion::best,
                                        stream);
                   }),
           on_cpu(DType::f32,
                  [&] {
                    cpu::lrn_backward(s, p, x.data<float>(), y.data<float>(), scale.data<float>(),
                                      dy.data<float>(), dx.data<float>(), ctx.num_threads());
                  }),
           on_cpu(DType::f64, [&] {
             ref::lrn_backward(s, p, x.data<double>(), y.data<double>(), scale.data<double>(),
                               dy.data<double>(), dx.data<double>());
           }));
}

}  // namespace crema::kernels
