// The primitive API's convolution and pooling: geometry from the descriptors' dims, inputs packed
// (borrowed or gathered), the Tensor-level kernel, the output blended (stage.h). A channels-last
// x (dy for backward data) runs the kernels' NHWC path, the other tensors gathered to NHWC (the
// filter to KRSC) where they are not already.
#include "core/error.h"
#include "kernels/api/primitives.h"
#include "kernels/api/stage.h"
#include "kernels/convolution/convolution.h"
#include "kernels/pooling/pooling.h"

namespace crema::kernels::api {

using stage::layout_for;
using stage::Output;
using stage::packed_input;
using stage::require_rank;
using stage::validate_all;
using stage::Writes;

namespace {

// The geometry of x [N, C, H, W] (from `xd`, dims of x or dx) and w [K, C/groups, R, S].
Conv2dGeometry geometry(const char* op, const ConvDesc& conv, const char* x_name,
                        const TensorDesc& xd, const TensorDesc& wd) {
  require_rank(op, x_name, xd, 4);
  require_rank(op, "w", wd, 4);
  Conv2dGeometry g;
  g.N = xd.dims[0];
  g.C = xd.dims[1];
  g.H = xd.dims[2];
  g.W = xd.dims[3];
  g.K = wd.dims[0];
  g.R = wd.dims[2];
  g.S = wd.dims[3];
  g.pad_h = conv.pad_h;
  g.pad_w = conv.pad_w;
  g.stride_h = conv.stride_h;
  g.stride_w = conv.stride_w;
  g.dilation_h = conv.dilation_h;
  g.dilation_w = conv.dilation_w;
  g.groups = conv.groups;
  g.validate(op);
  return g;
}

Pool2dGeometry pool_geometry(const char* op, const PoolDesc& pool, const TensorDesc& x,
                             const TensorDesc& y) {
  require_rank(op, "x", x, 4);
  require_rank(op, "y", y, 4);
  if (y.dims[0] != x.dims[0] || y.dims[1] != x.dims[1]) {
    throw Error(std::string(op) + ": y: dims " + shape_str(y.dims) + ", expected x's N and C (" +
                shape_str(x.dims) + ")");
  }
  return {x.dims[0],
          x.dims[1],
          x.dims[2],
          x.dims[3],
          pool.kernel_h,
          pool.kernel_w,
          pool.stride_h,
          pool.stride_w,
          pool.pad_h,
          pool.pad_w,
          y.dims[2],
          y.dims[3],
          pool.count_include_pad};
}

}  // namespace

void convolution_forward(Context& ctx, const ConvDesc& conv, double alpha, const TensorDesc& x,
                         const TensorDesc& w, double beta, const TensorDesc& y,
                         const ConvRequest& request) {
  const char* op = "convolution_forward";
  validate_all(ctx, op, {{"x", &x}, {"w", &w}, {"y", &y}});
  const Conv2dGeometry g = geometry(op, conv, "x", x, w);
  validate_dims(op, "y", y, g.y_shape());
  const Layout layout = layout_for(x);
  const Tensor xt = packed_input(ctx, x, layout), wt = packed_input(ctx, w, layout);
  Output out(ctx, y, alpha, beta, Writes::whole, {&x, &w}, layout);
  conv2d_forward(ctx, g, xt, wt, nullptr, out.tensor(), request);
  out.finish();
}

void convolution_backward_data(Context& ctx, const ConvDesc& conv, double alpha,
                               const TensorDesc& w, const TensorDesc& dy, double beta,
                               const TensorDesc& dx, const ConvRequest& request) {
  const char* op = "convolution_backward_data";
  validate_all(ctx, op, {{"w", &w}, {"dy", &dy}, {"dx", &dx}});
  const Conv2dGeometry g = geometry(op, conv, "dx", dx, w);
  validate_dims(op, "dy", dy, g.y_shape());
  const Layout layout = layout_for(dy);
  const Tensor wt = packed_input(ctx, w, layout), dyt = packed_input(ctx, dy, layout);
  Output out(ctx, dx, alpha, beta, Writes::whole, {&w, &dy}, layout);
  conv2d_backward_data(ctx, g, dyt, wt, out.tensor(), request);
  out.finish();
}

void convolution_backward_filter(Context& ctx, const ConvDesc& conv, double alpha,
                                 const TensorDesc& x, const TensorDesc& dy, double beta,
                                 const TensorDesc& dw, const ConvRequest& request) {
  const char* op = "convolution_backward_filter";
  validate_all(ctx, op, {{"x", &x}, {"dy", &dy}, {"dw", &dw}});
  const Conv2dGeometry g = geometry(op, conv, "x", x, dw);
  validate_dims(op, "dy", dy, g.y_shape());
  const Layout layout = layout_for(x);
  const Tensor xt = packed_input(ctx, x, layout), dyt = packed_input(ctx, dy, layout);
  Output out(ctx, dw, alpha, beta, Writes::accumulated, {&x, &dy}, layout);
  conv2d_backward_filter(ctx, g, xt, dyt, out.tensor(), request);
  out.finish();
}

void convolution_backward_bias(Context& ctx, double alpha, const TensorDesc& dy, double beta,
                               const TensorDesc& db) {
  const char* op = "convolution_backward_bias";
  validate_all(ctx, op, {{"dy", &dy}, {"db", &db}});
  require_rank(op, "dy", dy, 4);
  const int64_t K = dy.dims[1];
  if (db.dims != Shape{K} && db.dims != Shape{1, K, 1, 1}) {
    throw Error(std::string(op) + ": db: dims " + shape_str(db.dims) + ", expected [" +
                std::to_string(K) + "] or [1, " + std::to_string(K) + ", 1, 1]");
  }
  // The bias gradient of a 1x1 convolution whose output is dy: only N, K, P, Q matter.
  Conv2dGeometry g;
  g.N = dy.dims[0];
  g.C = g.K = K;
  g.H = dy.dims[2];
  g.W = dy.dims[3];
  g.R = g.S = 1;
  const Tensor dyt = packed_input(ctx, dy);
  Output out(ctx, db, alpha, beta, Writes::accumulated, {&dy});
  Tensor dbt = out.tensor({K});
  conv2d_backward_bias(ctx, g, dyt, dbt);
  out.finish();
}

void pooling_forward(Context& ctx, const PoolDesc& pool, double alpha, const TensorDesc& x,
                     double beta, const TensorDesc& y) {
  const char* op = "pooling_forward";
  validate_all(ctx, op, {{"x", &x}, {"y", &y}});
  const Pool2dGeometry g = pool_geometry(op, pool, x, y);
  const Layout layout = layout_for(x);
  const Tensor xt = packed_input(ctx, x, layout);
  Output out(ctx, y, alpha, beta, Writes::whole, {&x}, layout);
  pool2d_forward(ctx, g, pool.mode, xt, out.tensor(), nullptr);
  out.finish();
}

void pooling_backward(Context& ctx, const PoolDesc& pool, double alpha, const TensorDesc& y,
                      const TensorDesc& dy, const TensorDesc& x, double beta,
                      const TensorDesc& dx) {
  const char* op = "pooling_backward";
  const DType dtype = validate_all(ctx, op, {{"y", &y}, {"dy", &dy}, {"x", &x}, {"dx", &dx}});
  const Pool2dGeometry g = pool_geometry(op, pool, x, y);
  validate_dims(op, "dy", dy, y.dims);
  validate_dims(op, "dx", dx, x.dims);
  const Layout layout = layout_for(x);
  const Tensor dyt = packed_input(ctx, dy, layout);
  Tensor argmax;
  if (pool.mode == PoolMode::max) {
    // The max positions, recomputed from x (a deterministic forward: the ones y came from).
    const Tensor xt = packed_input(ctx, x, layout);
    Tensor again = ctx.empty(y.dims, dtype);
    argmax = ctx.empty(y.dims, dtype == DType::f64 ? DType::f64 : DType::f32);
    again.set_layout(layout);
    argmax.set_layout(layout);
    pool2d_forward(ctx, g, pool.mode, xt, again, &argmax);
  }
  Output out(ctx, dx, alpha, beta, Writes::whole, {&y, &dy, &x}, layout);
  pool2d_backward(ctx, g, pool.mode, dyt, argmax.defined() ? &argmax : nullptr, out.tensor());
  out.finish();
}

}  // namespace crema::kernels::api
