// N-d convolution: the geometry's checks and forms, and the Tensor-level passes. Rank 1 and 2
// call the 2-D entry points (convolution.h) on 4-D views of the same storage; rank 3 dispatches
// (kernels/common/dispatch.h) to cuda f32 (depth_col: the 2-D record `request` picks for the
// chunk's 2-D geometry; vol2col + GEMM where depth_col does not apply), cpu f32 (vol2col + GEMM)
// or cpu f64 (the reference). The parameters (bias, dw, db) are conv_parameter_dtype of the
// activations' (f32 for bf16 and f16 ones, which only the 2-D calls run).
#include <string>

#include "core/build_config.h"
#include "core/error.h"
#include "kernels/common/dispatch.h"
#include "kernels/common/tensor_checks.h"
#include "kernels/convolution/convolution.h"
#include "kernels/convolution/convolution_nd.h"

namespace crema::kernels {
namespace {

// "3x5x5": the first `rank` entries.
std::string extents(const std::array<int64_t, 3>& v, int rank) {
  std::string s;
  for (int a = 0; a < rank; ++a) s += (a ? "x" : "") + std::to_string(v[a]);
  return s;
}

void check_positive(const std::string& where, const std::string& name, int64_t value) {
  if (value <= 0) {
    throw Error(where + ": " + name + " must be positive, got " + std::to_string(value));
  }
}

template <class T>
const T* data_or_null(const Tensor* t) {
  return t ? t->data<T>() : nullptr;
}

// A 4-D view of a rank-1 or rank-2 tensor: [N, C, L] as [N, C, 1, L] (filters [K, Cg, S] likewise).
// A 3-D tensor has one order whatever its layout label (core/tensor.h): its view is nchw.
Tensor view_2d(const Tensor& t) {
  if (t.ndim() == 4) return t;
  Tensor v = t.view({t.dim(0), t.dim(1), 1, t.dim(2)});
  v.set_layout(Layout::nchw);
  return v;
}

// Rank 3 on CUDA by depth_col (convolution_nd.h): the plan, and the 2-D record `request` picks
// for the chunk's 2-D geometry -- its memo, find's cache and a pinned record all apply to that
// geometry -- under what the workspace limit leaves after the chunk's own scratch. A template
// on the dispatch's stream type, so that, like the CUDA lambdas calling it, a build without CUDA
// never compiles it (dispatch.h).
struct DepthCol {
  cuda::ConvNdDepthPlan plan;
  const ConvAlgorithm& inner;
};
// The workspace limit left to the 2-D record once the chunk's col and 2-D output are counted.
size_t inner_workspace_limit(const cuda::ConvNdDepthPlan& plan, size_t limit) {
  if (limit == kNoWorkspaceLimit) return limit;
  const Conv2dGeometry& g2 = plan.g2;
  const size_t scratch =
      size_t(g2.N * g2.C * g2.H * g2.W + g2.N * g2.K * g2.P() * g2.Q()) * sizeof(float);
  return limit > scratch ? limit - scratch : 0;
}
template <class Stream>
DepthCol depth_col(Stream, Context& ctx, ConvPass pass, const ConvNdGeometry& g,
                   const ConvRequest& request, const char* op) {
  const cuda::ConvNdDepthPlan plan = cuda::conv_nd_depth_plan(g);
  ConvRequest inner = request;
  inner.workspace_limit = inner_workspace_limit(plan, request.workspace_limit);
  return {plan, select_conv_algorithm(ctx, pass, plan.g2, inner, op)};
}

// Rank 3's f32 workspace on CUDA (conv_nd_workspace_bytes), in floats: a template, so that a
// build without CUDA, where the cuda:: queries do not exist, never instantiates the branch that
// calls them (as convolution_workspace.cpp's).
template <bool with_cuda>
size_t cuda_workspace_floats(ConvPass pass, const ConvNdGeometry& g, const ConvRequest& request,
                             bool with_bias) {
  if constexpr (with_cuda) {
    if (!cuda::conv_nd_depth_supports(g)) return cuda::conv_nd_workspace(g);
    const cuda::ConvNdDepthPlan plan = cuda::conv_nd_depth_plan(g);
    const ConvMemo* memo = request.memo;
    const ConvAlgorithm& inner =
        memo != nullptr && memo->geometry == plan.g2 ? *memo->algorithm
        : request.mode == ConvRequest::Mode::pinned
            ? *request.pinned
            : get_conv_algorithm(pass, plan.g2, request.math,
                                 inner_workspace_limit(plan, request.workspace_limit));
    return cuda::conv_nd_depth_workspace(pass, g, plan, inner, with_bias);
  } else {
    return 0;
  }
}

}  // namespace

size_t conv_nd_workspace_bytes(const Device& device, ConvPass pass, const ConvNdGeometry& g,
                               DType dtype, Layout layout, const ConvRequest& request,
                               bool with_bias, int num_threads) {
  if (g.rank < 3) {
    return conv2d_workspace_bytes(device, pass, g.as_2d(), dtype, layout, request, with_bias,
                                  num_threads);
  }
  if (dtype != DType::f32) return 0;  // f64 runs the reference, which takes none
  const size_t floats = device.is_cuda()
                            ? cuda_workspace_floats<kBuiltWithCuda>(pass, g, request, with_bias)
                            : cpu::conv_nd_workspace(g);
  return floats * sizeof(float);
}

int64_t ConvNdGeometry::in_volume() const {
  int64_t v = 1;
  for (int a = 0; a < rank; ++a) v *= in[a];
  return v;
}
int64_t ConvNdGeometry::out_volume() const {
  int64_t v = 1;
  for (int a = 0; a < rank; ++a) v *= out(a);
  return v;
}
int64_t ConvNdGeometry::kernel_volume() const {
  int64_t v = 1;
  for (int a = 0; a < rank; ++a) v *= kernel[a];
  return v;
}

Shape ConvNdGeometry::x_shape() const {
  Shape s{N, C};
  for (int a = 0; a < rank; ++a) s.push_back(in[a]);
  return s;
}
Shape ConvNdGeometry::w_shape() const {
  Shape s{K, C / groups};
  for (int a = 0; a < rank; ++a) s.push_back(kernel[a]);
  return s;
}
Shape ConvNdGeometry::y_shape() const {
  Shape s{N, K};
  for (int a = 0; a < rank; ++a) s.push_back(out(a));
  return s;
}

void ConvNdGeometry::validate(const std::string& where) const {
  if (rank < 1 || rank > 3) {
    throw Error(where + ": 1, 2 or 3 spatial axes, got " + std::to_string(rank));
  }
  check_positive(where, "batch size N", N);
  check_positive(where, "input channels C", C);
  check_positive(where, "output channels K", K);
  check_positive(where, "groups", groups);
  for (int a = 0; a < rank; ++a) {
    const std::string axis = " along spatial axis " + std::to_string(a);
    check_positive(where, "the input extent" + axis, in[a]);
    check_positive(where, "the filter extent" + axis, kernel[a]);
    check_positive(where, "the stride" + axis, stride[a]);
    check_positive(where, "the dilation" + axis, dilation[a]);
    if (pad[a] < 0) {
      throw Error(where + ": padding must not be negative, got " + extents(pad, rank));
    }
  }
  if (C % groups != 0 || K % groups != 0) {
    throw Error(where + ": " + std::to_string(groups) + " groups must divide both the input " +
                "channels C=" + std::to_string(C) +
                " and the output channels K=" + std::to_string(K));
  }
  std::array<int64_t, 3> span{}, padded_in{};
  bool fits = true;
  for (int a = 0; a < rank; ++a) {
    span[a] = dilation[a] * (kernel[a] - 1) + 1;
    padded_in[a] = in[a] + 2 * pad[a];
    fits = fits && span[a] <= padded_in[a];
  }
  if (!fits) {
    throw Error(where + ": the " + extents(kernel, rank) + " filter (spanning " +
                extents(span, rank) + " with dilation " + extents(dilation, rank) +
                ") is larger than the padded input " + extents(padded_in, rank) + " (input " +
                extents(in, rank) + ", padding " + extents(pad, rank) +
                "); use a smaller filter or more padding");
  }
}

Conv2dGeometry ConvNdGeometry::as_2d() const {
  const ConvNdGeometry p = padded();
  Conv2dGeometry g{N, C, p.in[1], p.in[2], K, p.kernel[1], p.kernel[2]};
  g.pad_h = p.pad[1];
  g.pad_w = p.pad[2];
  g.stride_h = p.stride[1];
  g.stride_w = p.stride[2];
  g.dilation_h = p.dilation[1];
  g.dilation_w = p.dilation[2];
  g.groups = groups;
  return g;
}

ConvNdGeometry ConvNdGeometry::padded() const {
  ConvNdGeometry p = *this;
  p.rank = 3;
  const int shift = 3 - rank;
  for (int a = 2; a >= 0; --a) {
    const bool real = a >= shift;
    p.in[a] = real ? in[a - shift] : 1;
    p.kernel[a] = real ? kernel[a - shift] : 1;
    p.pad[a] = real ? pad[a - shift] : 0;
    p.stride[a] = real ? stride[a - shift] : 1;
    p.dilation[a] = real ? dilation[a - shift] : 1;
  }
  return p;
}

void conv_nd_forward(Context& ctx, const ConvNdGeometry& g, const Tensor& x, const Tensor& w,
                     const Tensor* bias, Tensor& y, const ConvRequest& request) {
  const char* op = "conv_nd_forward";
  g.validate(op);
  const DType dtype = x.dtype();
  check_tensor(ctx, op, "x", x, g.x_shape(), dtype);
  check_tensor(ctx, op, "w", w, g.w_shape(), dtype);
  if (bias) check_tensor(ctx, op, "bias", *bias, {g.K}, conv_parameter_dtype(dtype));
  check_tensor(ctx, op, "y", y, g.y_shape(), dtype);
  if (g.rank < 3) {
    Tensor y2 = view_2d(y);
    conv2d_forward(ctx, g.as_2d(), view_2d(x), view_2d(w), bias, y2, request);
    return;
  }
  dispatch(ctx, op, dtype,
           on_cuda(DType::f32,
                   [&](auto stream) {
                     if (!cuda::conv_nd_depth_supports(g)) {
                       cuda::conv_nd_forward(g, x.data<float>(), w.data<float>(),
                                             data_or_null<float>(bias), y.data<float>(),
                                             ctx.workspace(cuda::conv_nd_workspace(g)), stream);
                       return;
                     }
                     const DepthCol d = depth_col(stream, ctx, ConvPass::forward, g, request, op);
                     float* workspace = ctx.workspace(cuda::conv_nd_depth_workspace(
                         ConvPass::forward, g, d.plan, d.inner, false));
                     cuda::conv_nd_depth_forward(g, d.plan, d.inner, request.math, x.data<float>(),
                                                 w.data<float>(), data_or_null<float>(bias),
                                                 y.data<float>(), workspace, stream);
                   }),
           on_cpu(DType::f32,
                  [&] {
                    cpu::conv_nd_forward(g, x.data<float>(), w.data<float>(),
                                         data_or_null<float>(bias), y.data<float>(),
                                         ctx.workspace(cpu::conv_nd_workspace(g)),
                                         ctx.num_threads());
                  }),
           on_cpu(DType::f64, [&] {
             ref::conv_nd_forward(g, x.data<double>(), w.data<double>(), data_or_null<double>(bias),
                                  y.data<double>());
           }));
}

void conv_nd_backward_data(Context& ctx, const ConvNdGeometry& g, const Tensor& dy, const Tensor& w,
                           Tensor& dx, const ConvRequest& request) {
  const char* op = "conv_nd_backward_data";
  g.validate(op);
  const DType dtype = dy.dtype();
  check_tensor(ctx, op, "dy", dy, g.y_shape(), dtype);
  check_tensor(ctx, op, "w", w, g.w_shape(), dtype);
  check_tensor(ctx, op, "dx", dx, g.x_shape(), dtype);
  if (g.rank < 3) {
    Tensor dx2 = view_2d(dx);
    conv2d_backward_data(ctx, g.as_2d(), view_2d(dy), view_2d(w), dx2, request);
    return;
  }
  dispatch(
      ctx, op, dtype,
      on_cuda(
          DType::f32,
          [&](auto stream) {
            if (!cuda::conv_nd_depth_supports(g)) {
              cuda::conv_nd_backward_data(g, dy.data<float>(), w.data<float>(), dx.data<float>(),
                                          ctx.workspace(cuda::conv_nd_workspace(g)), stream);
              return;
            }
            const DepthCol d = depth_col(stream, ctx, ConvPass::backward_data, g, request, op);
            float* workspace = ctx.workspace(
                cuda::conv_nd_depth_workspace(ConvPass::backward_data, g, d.plan, d.inner, false));
            cuda::conv_nd_depth_backward_data(g, d.plan, d.inner, request.math, dy.data<float>(),
                                              w.data<float>(), dx.data<float>(), workspace, stream);
          }),
      on_cpu(DType::f32,
             [&] {
               cpu::conv_nd_backward_data(g, dy.data<float>(), w.data<float>(), dx.data<float>(),
                                          ctx.workspace(cpu::conv_nd_workspace(g)),
                                          ctx.num_threads());
             }),
      on_cpu(DType::f64, [&] {
        ref::conv_nd_backward_data(g, dy.data<double>(), w.data<double>(), dx.data<double>());
      }));
}

void conv_nd_backward_weights(Context& ctx, const ConvNdGeometry& g, const Tensor& x,
                              const Tensor& dy, Tensor* dw, Tensor* db,
                              const ConvRequest& request) {
  const char* op = "conv_nd_backward_weights";
  g.validate(op);
  if (dw == nullptr && db == nullptr) throw Error(std::string(op) + ": neither dw nor db given");
  const DType dtype = dy.dtype();
  check_tensor(ctx, op, "x", x, g.x_shape(), dtype);
  check_tensor(ctx, op, "dy", dy, g.y_shape(), dtype);
  if (dw) check_tensor(ctx, op, "dw", *dw, g.w_shape(), conv_parameter_dtype(dtype));
  if (db) check_tensor(ctx, op, "db", *db, {g.K}, conv_parameter_dtype(dtype));
  if (g.rank < 3) {
    const Conv2dGeometry g2 = g.as_2d();
    if (dw == nullptr) {
      conv2d_backward_bias(ctx, g2, view_2d(dy), *db);
      return;
    }
    Tensor dw2 = view_2d(*dw);
    conv2d_backward_weights(ctx, g2, view_2d(x), view_2d(dy), dw2, db, request);
    return;
  }
  const int64_t volume = g.out_volume();
  dispatch(
      ctx, op, dtype,
      on_cuda(
          DType::f32,
          [&](auto stream) {
            // depth_col's 2-D filter pass sums db along with dw; alone, db is one reduction.
            if (dw && cuda::conv_nd_depth_supports(g)) {
              const DepthCol d = depth_col(stream, ctx, ConvPass::backward_filter, g, request, op);
              float* workspace = ctx.workspace(cuda::conv_nd_depth_workspace(
                  ConvPass::backward_filter, g, d.plan, d.inner, db != nullptr));
              cuda::conv_nd_depth_backward_filter(
                  g, d.plan, d.inner, request.math, x.data<float>(), dy.data<float>(),
                  dw->data<float>(), db ? db->data<float>() : nullptr, workspace, stream);
              return;
            }
            if (dw) {
              cuda::conv_nd_backward_filter(g, x.data<float>(), dy.data<float>(), dw->data<float>(),
                                            ctx.workspace(cuda::conv_nd_workspace(g)), stream);
            }
            if (db)
              cuda::channel_bias_gradient(g.N, g.K, volume, dy.data<float>(), db->data<float>(),
                                          stream);
          }),
      on_cpu(DType::f32,
             [&] {
               if (dw) {
                 cpu::conv_nd_backward_filter(
                     g, x.data<float>(), dy.data<float>(), dw->data<float>(),
                     ctx.workspace(cpu::conv_nd_workspace(g)), ctx.num_threads());
               }
               if (db)
                 cpu::channel_bias_gradient(g.N, g.K, volume, dy.data<float>(), db->data<float>(),
                                            ctx.num_threads());
             }),
      on_cpu(DType::f64, [&] {
        if (dw)
          ref::conv_nd_backward_filter(g, x.data<double>(), dy.data<double>(), dw->data<double>());
        if (db) ref::channel_bias_gradient(g.N, g.K, volume, dy.data<double>(), db->data<double>());
      }));
}

}  // namespace crema::kernels
