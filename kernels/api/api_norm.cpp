// The primitive API's normalizations: LRN, divisive normalization and LCN, batch norm (stage.h
// has the staging rules).
#include "core/error.h"
#include "kernels/api/primitives.h"
#include "kernels/api/stage.h"
#include "kernels/batch_norm/batch_norm.h"
#include "kernels/tensor_ops/tensor_ops.h"

namespace crema::kernels::api {

using stage::Output;
using stage::packed_input;
using stage::packed_param;
using stage::require_rank;
using stage::validate_all;
using stage::Writes;

namespace {

Tensor optional_input(Context& ctx, const TensorDesc* d) {
  return d != nullptr ? packed_input(ctx, *d) : Tensor();
}

// The shape batch norm's kernels give a parameter: [C] (spatial) or x's dims after N.
Shape param_shape(BatchNormMode mode, const TensorDesc& x) {
  if (mode == BatchNormMode::spatial) return {x.dims[1]};
  return Shape(x.dims.begin() + 1, x.dims.end());
}

// A parameter descriptor's dims: the parameter shape, or it with extent-1 dims around it
// ([1, C, 1, 1] for [C]; [1, C, H, W] for [C, H, W]), as cuDNN's derived descriptors.
void check_param_dims(const char* op, const char* name, BatchNormMode mode, const TensorDesc& x,
                      const TensorDesc& p) {
  const Shape want = param_shape(mode, x);
  Shape padded(x.dims.size(), 1);
  if (mode == BatchNormMode::spatial) {
    padded[1] = x.dims[1];
  } else {
    for (size_t k = 1; k < x.dims.size(); ++k) padded[k] = x.dims[k];
  }
  if (p.dims != want && p.dims != padded) {
    throw Error(std::string(op) + ": " + name + ": dims " + shape_str(p.dims) + ", expected " +
                shape_str(want) + " or " + shape_str(padded));
  }
}

// Spatial batch norm has an NHWC path in every implementation; per activation is NCHW only.
Layout bn_layout(BatchNormMode mode, const TensorDesc& x) {
  return mode == BatchNormMode::spatial ? stage::layout_for(x) : Layout::nchw;
}

}  // namespace

void lrn_forward(Context& ctx, const LrnParams& lrn, double alpha, const TensorDesc& x, double beta,
                 const TensorDesc& y) {
  const char* op = "lrn_forward";
  const DType dtype = validate_all(ctx, op, {{"x", &x}, {"y", &y}});
  require_rank(op, "x", x, 4);
  validate_dims(op, "y", y, x.dims);
  const Tensor xt = packed_input(ctx, x);
  Tensor scale = ctx.empty(x.dims, dtype);
  Output out(ctx, y, alpha, beta, Writes::whole, {&x});
  kernels::lrn_forward(ctx, lrn, xt, out.tensor(), scale);
  out.finish();
}

void lrn_backward(Context& ctx, const LrnParams& lrn, double alpha, const TensorDesc& y,
                  const TensorDesc& dy, const TensorDesc& x, double beta, const TensorDesc& dx) {
  const char* op = "lrn_backward";
  const DType dtype = validate_all(ctx, op, {{"y", &y}, {"dy", &dy}, {"x", &x}, {"dx", &dx}});
  require_rank(op, "x", x, 4);
  validate_dims(op, "y", y, x.dims);
  validate_dims(op, "dy", dy, x.dims);
  validate_dims(op, "dx", dx, x.dims);
  // The forward's scale (and so y), recomputed from x: the kernel's backward reads both.
  const Tensor xt = packed_input(ctx, x), dyt = packed_input(ctx, dy);
  Tensor again = ctx.empty(x.dims, dtype), scale = ctx.empty(x.dims, dtype);
  kernels::lrn_forward(ctx, lrn, xt, again, scale);
  Output out(ctx, dx, alpha, beta, Writes::whole, {&y, &dy, &x});
  kernels::lrn_backward(ctx, lrn, xt, again, scale, dyt, out.tensor());
  out.finish();
}

void divisive_normalization_forward(Context& ctx, const LcnParams& lcn, double alpha,
                                    const TensorDesc& x, const TensorDesc* means, double beta,
                                    const TensorDesc& y) {
  const char* op = "divisive_normalization_forward";
  validate_all(ctx, op, {{"x", &x}, {"means", means}, {"y", &y}});
  require_rank(op, "x", x, 4);
  if (means != nullptr) validate_dims(op, "means", *means, x.dims);
  validate_dims(op, "y", y, x.dims);
  const Tensor xt = packed_input(ctx, x), mt = optional_input(ctx, means);
  Output out(ctx, y, alpha, beta, Writes::blended, {&x, means});
  divnorm_forward(ctx, lcn, out.alpha(), xt, mt, out.beta(), out.tensor());
  out.finish();
}

void divisive_normalization_backward(Context& ctx, const LcnParams& lcn, double alpha,
                                     const TensorDesc& x, const TensorDesc* means,
                                     const TensorDesc& dy, double beta, const TensorDesc& dx,
                                     const TensorDesc* dmeans) {
  const char* op = "divisive_normalization_backward";
  validate_all(ctx, op,
               {{"x", &x}, {"means", means}, {"dy", &dy}, {"dx", &dx}, {"dmeans", dmeans}});
  require_rank(op, "x", x, 4);
  if (means != nullptr) validate_dims(op, "means", *means, x.dims);
  validate_dims(op, "dy", dy, x.dims);
  validate_dims(op, "dx", dx, x.dims);
  if (dmeans != nullptr) validate_dims(op, "dmeans", *dmeans, x.dims);
  const Tensor xt = packed_input(ctx, x), mt = optional_input(ctx, means);
  const Tensor dyt = packed_input(ctx, dy);
  if (dmeans == nullptr) {
    Output out(ctx, dx, alpha, beta, Writes::blended, {&x, means, &dy});
    Tensor none;
    divnorm_backward(ctx, lcn, out.alpha(), xt, mt, dyt, out.beta(), out.tensor(), none);
    return out.finish();
  }
  Output out(ctx, dx, alpha, beta, Writes::blended, {&x, means, &dy, dmeans});
  Output dm(ctx, *dmeans, alpha, beta, Writes::blended, {&x, means, &dy, &dx});
  if (!out.staged() && !dm.staged()) {
    divnorm_backward(ctx, lcn, alpha, xt, mt, dyt, beta, out.tensor(), dm.tensor());
    return;
  }
  // The kernel blends both with one alpha and beta, and one output goes through scratch: the
  // kernel writes both plainly into scratch, then each is blended into its descriptor.
  Tensor dxs = out.staged() ? out.tensor() : ctx.empty(dx.dims, dx.dtype);
  Tensor dms = dm.staged() ? dm.tensor() : ctx.empty(dmeans->dims, dmeans->dtype);
  divnorm_backward(ctx, lcn, 1.0, xt, mt, dyt, 0.0, dxs, dms);
  stage::blend_packed(ctx, dxs, dx, alpha, beta);
  stage::blend_packed(ctx, dms, *dmeans, alpha, beta);
}

void lcn_forward(Context& ctx, const LcnParams& lcn, double alpha, const TensorDesc& x, double beta,
                 const TensorDesc& y) {
  const char* op = "lcn_forward";
  validate_all(ctx, op, {{"x", &x}, {"y", &y}});
  require_rank(op, "x", x, 4);
  validate_dims(op, "y", y, x.dims);
  const Tensor xt = packed_input(ctx, x);
  Output out(ctx, y, alpha, beta, Writes::blended, {&x});
  kernels::lcn_forward(ctx, lcn, out.alpha(), xt, out.beta(), out.tensor());
  out.finish();
}

void lcn_backward(Context& ctx, const LcnParams& lcn, double alpha, const TensorDesc& x,
                  const TensorDesc& dy, double beta, const TensorDesc& dx) {
  const char* op = "lcn_backward";
  validate_all(ctx, op, {{"x", &x}, {"dy", &dy}, {"dx", &dx}});
  require_rank(op, "x", x, 4);
  validate_dims(op, "dy", dy, x.dims);
  validate_dims(op, "dx", dx, x.dims);
  const Tensor xt = packed_input(ctx, x), dyt = packed_input(ctx, dy);
  Output out(ctx, dx, alpha, beta, Writes::blended, {&x, &dy});
  kernels::lcn_backward(ctx, lcn, out.alpha(), xt, dyt, out.beta(), out.tensor());
  out.finish();
}

void batch_norm_forward_training(Context& ctx, BatchNormMode mode, double alpha, double beta,
                                 const TensorDesc& x, const TensorDesc& y, const TensorDesc& gamma,
                                 const TensorDesc& bias, double momentum,
                                 const TensorDesc* running_mean, const TensorDesc* running_var,
                                 double eps, const TensorDesc& save_mean,
                                 const TensorDesc& save_invstd) {
  const char* op = "batch_norm_forward_training";
  validate_all(ctx, op,
               {{"x", &x},
                {"y", &y},
                {"gamma", &gamma},
                {"bias", &bias},
                {"running_mean", running_mean},
                {"running_var", running_var},
                {"save_mean", &save_mean},
                {"save_invstd", &save_invstd}});
  require_rank(op, "x", x, 2, true);
  validate_dims(op, "y", y, x.dims);
  const Shape ps = param_shape(mode, x);
  auto param = [&](const char* name, const TensorDesc* d) {
    if (d == nullptr) return Tensor();
    check_param_dims(op, name, mode, x, *d);
    return packed_param(op, name, *d, ps);
  };
  const Tensor g = param("gamma", &gamma), b = param("bias", &bias);
  Tensor rm = param("running_mean", running_mean), rv = param("running_var", running_var);
  Tensor sm = param("save_mean", &save_mean), si = param("save_invstd", &save_invstd);
  Tensor tracked;  // cuDNN keeps no batch count
  const Layout layout = bn_layout(mode, x);
  const Tensor xt = packed_input(ctx, x, layout);
  Output out(ctx, y, alpha, beta, Writes::whole, {&x}, layout);
  const auto run = mode == BatchNormMode::spatial
                       ? &kernels::batch_norm_forward_training
                       : &kernels::batch_norm_per_activation_forward_training;
  run(ctx, xt, g, b, float(eps), float(momentum), out.tensor(), sm, si, rm, rv, tracked);
  out.finish();
}

void batch_norm_forward_inference(Context& ctx, BatchNormMode mode, double alpha, double beta,
                                  const TensorDesc& x, const TensorDesc& y, const TensorDesc& gamma,
                                  const TensorDesc& bias, const TensorDesc& running_mean,
                                  const TensorDesc& running_var, double eps) {
  const char* op = "batch_norm_forward_inference";
  const DType dtype = validate_all(ctx, op,
                                   {{"x", &x},
                                    {"y", &y},
                                    {"gamma", &gamma},
                                    {"bias", &bias},
                                    {"running_mean", &running_mean},
                                    {"running_var", &running_var}});
  require_rank(op, "x", x, 2, true);
  validate_dims(op, "y", y, x.dims);
  const Shape ps = param_shape(mode, x);
  auto param = [&](const char* name, const TensorDesc& d) {
    check_param_dims(op, name, mode, x, d);
    return packed_param(op, name, d, ps);
  };
  const Tensor g = param("gamma", gamma), b = param("bias", bias);
  const Tensor rm = param("running_mean", running_mean), rv = param("running_var", running_var);
  Tensor sm = ctx.empty(ps, dtype), si = ctx.empty(ps, dtype);  // saved, unused here
  const Layout layout = bn_layout(mode, x);
  const Tensor xt = packed_input(ctx, x, layout);
  Output out(ctx, y, alpha, beta, Writes::whole, {&x}, layout);
  const auto run = mode == BatchNormMode::spatial
                       ? &kernels::batch_norm_forward_inference
                       : &kernels::batch_norm_per_activation_forward_inference;
  run(ctx, xt, g, b, rm, rv, float(eps), out.tensor(), sm, si);
  out.finish();
}

void batch_norm_backward(Context& ctx, BatchNormMode mode, double alpha_data, double beta_data,
                         double alpha_param, double beta_param, const TensorDesc& x,
                         const TensorDesc& dy, const TensorDesc& dx, const TensorDesc& gamma,
                         const TensorDesc& dgamma, const TensorDesc& dbias,
                         const TensorDesc& save_mean, const TensorDesc& save_invstd) {
  const char* op = "batch_norm_backward";
  validate_all(ctx, op,
               {{"x", &x},
                {"dy", &dy},
                {"dx", &dx},
                {"gamma", &gamma},
                {"dgamma", &dgamma},
                {"dbias", &dbias},
                {"save_mean", &save_mean},
                {"save_invstd", &save_invstd}});
  require_rank(op, "x", x, 2, true);
  validate_dims(op, "dy", dy, x.dims);
  validate_dims(op, "dx", dx, x.dims);
  const Shape ps = param_shape(mode, x);
  auto param = [&](const char* name, const TensorDesc& d) {
    check_param_dims(op, name, mode, x, d);
    return packed_param(op, name, d, ps);
  };
  const Tensor g = param("gamma", gamma), sm = param("save_mean", save_mean),
               si = param("save_invstd", save_invstd);
  check_param_dims(op, "dgamma", mode, x, dgamma);
  check_param_dims(op, "dbias", mode, x, dbias);
  const Layout layout = bn_layout(mode, x);
  const Tensor xt = packed_input(ctx, x, layout), dyt = packed_input(ctx, dy, layout);
  const std::initializer_list<const TensorDesc*> inputs = {&x, &dy, &gamma, &save_mean,
                                                           &save_invstd};
  Output out(ctx, dx, alpha_data, beta_data, Writes::whole, inputs, layout);
  // The kernel accumulates the parameter gradients (dgamma += ...).
  Output dg(ctx, dgamma, alpha_param, beta_param, Writes::accumulated, inputs);
  Output db(ctx, dbias, alpha_param, beta_param, Writes::accumulated, inputs);
  Tensor dgt = dg.tensor(ps), dbt = db.tensor(ps);
  const auto run = mode == BatchNormMode::spatial ? &kernels::batch_norm_backward
                                                  : &kernels::batch_norm_per_activation_backward;
  run(ctx, xt, dyt, g, sm, si, true, out.tensor(), dgt, dbt);
  out.finish();
  dg.finish();
  db.finish();
}

}  // namespace crema::kernels::api
