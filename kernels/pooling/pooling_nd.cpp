// N-d pooling, dispatch: checks the geometry and the tensors, then sends rank 1 and 2 to the 2-D
// entry points (pooling.h) on 4-D views and rank 3 to cuda f32, cpu f32 or the f64 reference.
#include "kernels/pooling/pooling_nd.h"

#include <string>

#include "core/error.h"
#include "kernels/common/dispatch.h"
#include "kernels/common/tensor_checks.h"
#include "kernels/pooling/argmax_checks.h"

namespace crema::kernels {
namespace {

std::string extents(const std::array<int64_t, 3>& v, int rank) {
  std::string s;
  for (int a = 0; a < rank; ++a) s += (a ? "x" : "") + std::to_string(v[a]);
  return s;
}

std::string geometry_str(const PoolNdGeometry& g) {
  return "input " + extents(g.in, g.rank) + ", kernel " + extents(g.kernel, g.rank) + ", stride " +
         extents(g.stride, g.rank) + ", pad " + extents(g.pad, g.rank) + ", output " +
         extents(g.out, g.rank);
}

// As pooling.cpp's check, per axis: sizes positive, pad < kernel, and the last window starts
// inside the input.
void check_geometry(const char* op, const PoolNdGeometry& g, PoolMode mode) {
  if (g.rank < 1 || g.rank > 3) {
    throw Error(std::string(op) + ": 1, 2 or 3 spatial axes, got " + std::to_string(g.rank));
  }
  bool sizes_ok = g.N >= 0 && g.C >= 0, pad_ok = true, last_ok = true;
  for (int a = 0; a < g.rank; ++a) {
    sizes_ok = sizes_ok && g.in[a] >= 1 && g.kernel[a] >= 1 && g.stride[a] >= 1 && g.pad[a] >= 0 &&
               g.out[a] >= 1;
    pad_ok = pad_ok && g.pad[a] < g.kernel[a];
    last_ok = last_ok && (g.out[a] - 1) * g.stride[a] - g.pad[a] < g.in[a];
  }
  if (!sizes_ok) throw Error(std::string(op) + ": invalid geometry (" + geometry_str(g) + ")");
  if (!pad_ok) {
    throw Error(std::string(op) + ": padding must be smaller than the kernel (" + geometry_str(g) +
                ")");
  }
  if (!last_ok) {
    throw Error(std::string(op) + ": the last window lies entirely in the padding (" +
                geometry_str(g) + "); use pool2d_output_extent for the output size");
  }
  if (mode == PoolMode::max && g.in_volume() > (int64_t(1) << 24)) {
    throw Error(std::string(op) + ": a " + extents(g.in, g.rank) +
                " plane is too large for float32 argmax indices (at most 2^24 elements)");
  }
}

// [N, C, L] as [N, C, 1, L], in nchw: a 3-D tensor has one memory order whatever layout it is
// labelled with (a net in nhwc labels every blob), and the view must not be read as nhwc. 4-D
// tensors as they are.
Tensor view_2d(const Tensor& t) {
  if (t.ndim() == 4) return t;
  Tensor v = t.view({t.dim(0), t.dim(1), 1, t.dim(2)});
  v.set_layout(Layout::nchw);
  return v;
}

}  // namespace

int64_t PoolNdGeometry::in_volume() const {
  int64_t v = 1;
  for (int a = 0; a < rank; ++a) v *= in[a];
  return v;
}
int64_t PoolNdGeometry::out_volume() const {
  int64_t v = 1;
  for (int a = 0; a < rank; ++a) v *= out[a];
  return v;
}
Shape PoolNdGeometry::x_shape() const {
  Shape s{N, C};
  for (int a = 0; a < rank; ++a) s.push_back(in[a]);
  return s;
}
Shape PoolNdGeometry::y_shape() const {
  Shape s{N, C};
  for (int a = 0; a < rank; ++a) s.push_back(out[a]);
  return s;
}

Pool2dGeometry PoolNdGeometry::as_2d() const {
  const PoolNdGeometry p = padded();
  Pool2dGeometry g{N,           C,           p.in[1],  p.in[2],  p.kernel[1], p.kernel[2],
                   p.stride[1], p.stride[2], p.pad[1], p.pad[2], p.out[1],    p.out[2]};
  g.count_include_pad = count_include_pad;
  return g;
}

PoolNdGeometry PoolNdGeometry::padded() const {
  PoolNdGeometry p = *this;
  p.rank = 3;
  const int shift = 3 - rank;
  for (int a = 2; a >= 0; --a) {
    const bool real = a >= shift;
    p.in[a] = real ? in[a - shift] : 1;
    p.kernel[a] = real ? kernel[a - shift] : 1;
    p.stride[a] = real ? stride[a - shift] : 1;
    p.pad[a] = real ? pad[a - shift] : 0;
    p.out[a] = real ? out[a - shift] : 1;
  }
  return p;
}

void pool_nd_forward(Context& ctx, const PoolNdGeometry& g, PoolMode mode, const Tensor& x,
                     Tensor& y, Tensor* argmax) {
  const char* op = "pool_nd_forward";
  check_geometry(op, g, mode);
  const DType dtype = x.dtype();
  check_tensor(ctx, op, "x", x, g.x_shape(), dtype);
  check_tensor(ctx, op, "y", y, g.y_shape(), dtype);
  pooling_detail::check_argmax(ctx, op, mode, argmax, g.y_shape(), dtype, false);
  if (g.rank < 3) {
    Tensor y2 = view_2d(y);
    Tensor argmax2 = argmax ? view_2d(*argmax) : Tensor();
    pool2d_forward(ctx, g.as_2d(), mode, view_2d(x), y2, argmax ? &argmax2 : nullptr);
    return;
  }
  dispatch(ctx, op, dtype,
           on_cuda(DType::f32,
                   [&](auto stream) {
                     cuda::pool_nd_forward(g, mode, x.data<float>(), y.data<float>(),
                                           pooling_detail::indices_of<float>(argmax), stream);
                   }),
           on_cpu(DType::f32,
                  [&] {
                    cpu::pool_nd_forward(g, mode, x.data<float>(), y.data<float>(),
                                         pooling_detail::indices_of<float>(argmax),
                                         ctx.num_threads());
                  }),
           on_cpu(DType::f64, [&] {
             ref::pool_nd_forward(g, mode, x.data<double>(), y.data<double>(),
                                  pooling_detail::indices_of<double>(argmax));
           }));
}

void pool_nd_backward(Context& ctx, const PoolNdGeometry& g, PoolMode mode, const Tensor& dy,
                      const Tensor* argmax, Tensor& dx) {
  const char* op = "pool_nd_backward";
  check_geometry(op, g, mode);
  const DType dtype = dy.dtype();
  check_tensor(ctx, op, "dy", dy, g.y_shape(), dtype);
  check_tensor(ctx, op, "dx", dx, g.x_shape(), dtype);
  pooling_detail::check_argmax(ctx, op, mode, argmax, g.y_shape(), dtype, true);
  if (g.rank < 3) {
    Tensor dx2 = view_2d(dx);
    const Tensor argmax2 = argmax ? view_2d(*argmax) : Tensor();
    pool2d_backward(ctx, g.as_2d(), mode, view_2d(dy), argmax ? &argmax2 : nullptr, dx2);
    return;
  }
  dispatch(ctx, op, dtype,
           on_cuda(DType::f32,
                   [&](auto stream) {
                     cuda::pool_nd_backward(g, mode, dy.data<float>(),
                                            pooling_detail::indices_of<float>(argmax),
                                            dx.data<float>(), stream);
                   }),
           on_cpu(DType::f32,
                  [&] {
                    cpu::pool_nd_backward(g, mode, dy.data<float>(),
                                          pooling_detail::indices_of<float>(argmax),
                                          dx.data<float>(), ctx.num_threads());
                  }),
           on_cpu(DType::f64, [&] {
             ref::pool_nd_backward(g, mode, dy.data<double>(),
                                   pooling_detail::indices_of<double>(argmax), dx.data<double>());
           }));
}

}  // namespace crema::kernels
