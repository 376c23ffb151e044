// crema bench pooling | lrn | softmax: the windowed and per-row memory-bound ops in every CUDA
// version (cuda::*Version; --version picks one; the layers run `best`), checked against
// ref<double> on the same exact inputs, then timed one pass at a time. The %peak column is of the
// copy bandwidth, measured first.
//
//   pooling  max and average, 3x3 stride 2 pad 1 (ResNet's stem pool) and 2x2 stride 2, on
//            x [N, C, H, W] in --layout nchw or nhwc, bf16 storage for --math bf16, f32
//            otherwise. Forward: x read, y written (+ the f32 argmax, max); backward: dy read
//            (+ argmax), dx written. Versions per_element and, where nhwc rows of C fill 16-byte
//            vectors, channel_vectors.
//   lrn      AlexNet's LRN across channels (local_size 5, alpha 1e-4, beta 0.75, k 1) on
//            x [N, C, H, W], f32 nchw (the only storage the call takes). Forward: x read, y and
//            scale written (3T); backward: x, y, scale, dy read, dx written (5T). Versions direct
//            and sliding.
//   softmax  over the classes of x [N, C] ("N,C" shapes), f32 (the only storage the call takes),
//            within 1e-5 + the float sums' worst-case rounding (C terms in sequence in one thread,
//            C/32 + 5 by a warp: 2^-24 each).
//            Forward: 2T; backward (y, dy -> dx): 3T. Versions thread_per_position and
//            warp_per_position.
//
// PyTorch's peer on the same shapes: scripts/bench/peer_memory_bound.py.
#include <cmath>
#include <limits>
#include <ostream>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "apps/bench.h"
#include "apps/bench_memory_bound.h"
#include "core/error.h"
#include "core/float16.h"
#include "core/random.h"
#include "kernels/elementwise/elementwise.h"
#include "kernels/lrn/lrn.h"
#include "kernels/pooling/pooling.h"
#include "kernels/softmax/softmax.h"

namespace crema::bench {
namespace {

namespace cuda = kernels::cuda;

// NaN in every output before a version runs, so that one which writes nothing cannot pass on an
// earlier version's results.
void poison(Context& ctx, std::vector<Tensor>& outputs) {
  for (Tensor& t : outputs) kernels::fill(ctx, t, std::numeric_limits<float>::quiet_NaN());
}

Layout layout_of(const Options& options) {
  return options.layout == "nhwc" ? Layout::nhwc : Layout::nchw;
}

// One pooling window of the table: its name and geometry on an N, C, H, W input.
struct Window {
  const char* name;
  int64_t kernel, stride, pad;
};
constexpr Window kWindows[] = {{"3x3s2p1", 3, 2, 1}, {"2x2s2", 2, 2, 0}};

kernels::Pool2dGeometry geometry_of(const BatchNormShape4& s, const Window& w) {
  const int64_t P = kernels::pool2d_output_extent(s.H, w.kernel, w.stride, w.pad, false);
  const int64_t Q = kernels::pool2d_output_extent(s.W, w.kernel, w.stride, w.pad, false);
  return {s.N, s.C, s.H, s.W, w.kernel, w.kernel, w.stride, w.stride, w.pad, w.pad, P, Q};
}

const Versions<cuda::PoolVersion> kPoolVersions = {
    {"per_element", cuda::PoolVersion::per_element},
    {"channel_vectors", cuda::PoolVersion::channel_vectors}};

// Whether channel_vectors runs as itself (pooling.h: nhwc, rows of C a whole number of 16-byte
// vectors; the allocator's pointers are aligned); elsewhere it runs per_element, a repeated row.
bool channel_vectors_apply(const BatchNormShape4& s, DType dtype, Layout layout) {
  return layout == Layout::nhwc && (s.C * int64_t(dtype_size(dtype))) % 16 == 0;
}

// cuda::pool2d_forward / pool2d_backward on tensors of storage T (float or bf16_t).
template <class T>
void pool_forward(const kernels::Pool2dGeometry& g, kernels::PoolMode mode, Tensor& x, Tensor& y,
                  Tensor* argmax, cuda::PoolVersion v, gpu::Stream stream) {
  cuda::pool2d_forward<T>(g, mode, x.data<T>(), y.data<T>(),
                          argmax != nullptr ? argmax->data<float>() : nullptr, x.layout(), v,
                          stream);
}
template <class T>
void pool_backward(const kernels::Pool2dGeometry& g, kernels::PoolMode mode, Tensor& dy,
                   Tensor* argmax, Tensor& dx, cuda::PoolVersion v, gpu::Stream stream) {
  cuda::pool2d_backward<T>(g, mode, dy.data<T>(),
                           argmax != nullptr ? argmax->data<float>() : nullptr, dx.data<T>(),
                           dy.layout(), v, stream);
}

// One window and mode on one shape: the check of both passes, then their times.
void bench_pool_case(Context& ctx, const Options& options, Table& table, const BatchNormShape4& s,
                     const Window& w, kernels::PoolMode mode, Random& random) {
  const DType dtype = storage_of(options);
  const Layout layout = layout_of(options);
  const bool max = mode == kernels::PoolMode::max;
  const kernels::Pool2dGeometry g = geometry_of(s, w);
  const Shape out_shape{s.N, s.C, g.P, g.Q};
  const Input x = make_input({s.N, s.C, s.H, s.W}, dtype, layout, random, -1.0, 1.0);
  const Input dy = make_input(out_shape, dtype, layout, random, -1.0, 1.0);
  std::vector<double> y_ref(dy.exact.size()), argmax_ref(max ? dy.exact.size() : 0);
  std::vector<double> dx_ref(x.exact.size());
  double* argmax_ptr = max ? argmax_ref.data() : nullptr;
  kernels::ref::pool2d_forward(g, mode, x.exact.data(), y_ref.data(), argmax_ptr, layout);
  kernels::ref::pool2d_backward(g, mode, dy.exact.data(), static_cast<const double*>(argmax_ptr),
                                dx_ref.data(), layout);

  const double in_bytes = double(x.exact.size()) * double(dtype_size(dtype));
  const double out_bytes = double(dy.exact.size()) * double(dtype_size(dtype));
  const double argmax_bytes = max ? double(dy.exact.size()) * 4.0 : 0.0;
  // Copies of every tensor, rotated so that no timed call finds its inputs in L2.
  const int copies = rotation_copies(size_t(in_bytes + out_bytes + argmax_bytes));
  std::vector<Tensor> xs, dys, ys, dxs, argmaxes;
  for (int k = 0; k < copies; ++k) {
    xs.push_back(upload(ctx, x.host));
    dys.push_back(upload(ctx, dy.host));
    ys.push_back(ctx.empty(out_shape, dtype));
    dxs.push_back(ctx.empty(x.host.shape(), dtype));
    ys.back().set_layout(layout);
    dxs.back().set_layout(layout);
    if (!max) continue;
    argmaxes.push_back(ctx.empty(out_shape, DType::f32));
    argmaxes.back().set_layout(layout);
  }
  auto argmax_of = [&](int k) { return max ? &argmaxes[size_t(k)] : nullptr; };
  const bool bf16 = dtype == DType::bf16;
  Row row;
  // The pass column names the pool: "max 3x3s2p1 fwd" (15 characters at most).
  const std::string pool = std::string(max ? "max " : "avg ") + w.name + " ";
  row.shape = s.str() + " " + dtype_name(dtype) + " " + options.layout;
  row.tolerance = tolerance_of(dtype);
  for (const auto& v : pick_versions(options, "pooling", kPoolVersions)) {
    if (v.second == cuda::PoolVersion::channel_vectors &&
        !channel_vectors_apply(s, dtype, layout)) {
      continue;
    }
    const auto forward = [&](int k) {
      if (bf16) {
        pool_forward<bf16_t>(g, mode, xs[k], ys[k], argmax_of(k), v.second, ctx.stream());
      } else {
        pool_forward<float>(g, mode, xs[k], ys[k], argmax_of(k), v.second, ctx.stream());
      }
    };
    const auto backward = [&](int k) {
      if (bf16) {
        pool_backward<bf16_t>(g, mode, dys[k], argmax_of(k), dxs[k], v.second, ctx.stream());
      } else {
        pool_backward<float>(g, mode, dys[k], argmax_of(k), dxs[k], v.second, ctx.stream());
      }
    };
    poison(ctx, ys);
    poison(ctx, dxs);
    poison(ctx, argmaxes);
    // Every copy's argmax for the timed backwards; the first copy's outputs checked.
    for (int k = 0; k < copies; ++k) forward(k);
    const double fwd_error = worst_error(ctx, {&ys[0]}, {&y_ref});
    backward(0);
    row.version = v.first;
    row.pass = pool + "fwd";
    row.rel_error = fwd_error;
    row.bytes = in_bytes + out_bytes + argmax_bytes;
    time_row(ctx, options, table, row, [&](int i) { forward(i % copies); });
    row.pass = pool + "bwd";
    row.rel_error = worst_error(ctx, {&dxs[0]}, {&dx_ref});
    row.bytes = out_bytes + argmax_bytes + in_bytes;
    time_row(ctx, options, table, row, [&](int i) { backward(i % copies); });
  }
}

// softmax's "N,C".
struct RowsShape {
  int64_t N = 0, C = 0;
  std::string str() const { return std::to_string(N) + "," + std::to_string(C); }
};

RowsShape parse_rows_shape(const std::string& text) {
  const std::vector<int64_t> v = parse_softmax_shape(text);
  return {v[0], v[1]};
}

}  // namespace

int bench_pooling(Context& ctx, const Options& options, std::ostream& out) {
  pick_versions(options, "pooling", kPoolVersions);  // a bad --version before any work
  const DType dtype = storage_of(options);
  Table table = open_table(ctx, std::string(dtype_name(dtype)) + " " + options.layout, out);
  Random random(3);
  for (const BatchNormShape4& s : shapes_of(options, {{64, 64, 112, 112}})) {
    for (const Window& w : kWindows) {
      for (const kernels::PoolMode mode : {kernels::PoolMode::max, kernels::PoolMode::average}) {
        bench_pool_case(ctx, options, table, s, w, mode, random);
      }
    }
  }
  return table.status();
}

int bench_lrn(Context& ctx, const Options& options, std::ostream& out) {
  if (options.layout != "nchw" || options.math == "bf16") {
    throw Error(
        "crema bench lrn: the LRN runs f32 nchw tensors only (no --layout nhwc or "
        "--math bf16)");
  }
  const auto versions = pick_versions<cuda::LrnVersion>(
      options, "lrn",
      {{"direct", cuda::LrnVersion::direct}, {"sliding", cuda::LrnVersion::sliding}});
  kernels::LrnParams p;
  p.local_size = 5;
  p.alpha = 1e-4f;
  p.beta = 0.75f;
  p.k = 1.0f;
  Table table = open_table(ctx, "f32 nchw", out);
  Random random(4);
  for (const BatchNormShape4& s : shapes_of(options, {{64, 96, 55, 55}})) {
    const Shape shape{s.N, s.C, s.H, s.W};
    const kernels::LrnShape ls{s.N, s.C, s.H, s.W};
    // Post-ReLU-like magnitudes so the window sums move the scale away from k.
    const Input x = make_input(shape, DType::f32, Layout::nchw, random, -10.0, 10.0);
    const Input dy = make_input(shape, DType::f32, Layout::nchw, random, -1.0, 1.0);
    std::vector<double> y_ref(x.exact.size()), scale_ref(x.exact.size()), dx_ref(x.exact.size());
    kernels::ref::lrn_forward(ls, p, x.exact.data(), y_ref.data(), scale_ref.data());
    kernels::ref::lrn_backward(ls, p, x.exact.data(), y_ref.data(), scale_ref.data(),
                               dy.exact.data(), dx_ref.data());
    const double tensor = double(x.exact.size()) * 4.0;
    const int copies = rotation_copies(size_t(5 * tensor));
    std::vector<Tensor> xs, dys, ys, scales, dxs;
    for (int k = 0; k < copies; ++k) {
      xs.push_back(upload(ctx, x.host));
      dys.push_back(upload(ctx, dy.host));
      ys.push_back(ctx.empty(shape));
      scales.push_back(ctx.empty(shape));
      dxs.push_back(ctx.empty(shape));
    }
    Row row;
    row.shape = s.str() + " n5 f32 nchw";
    row.tolerance = tolerance_of(DType::f32);
    for (const auto& v : versions) {
      const auto forward = [&](int k) {
        cuda::lrn_forward(ls, p, xs[k].data<float>(), ys[k].data<float>(), scales[k].data<float>(),
                          v.second, ctx.stream());
      };
      const auto backward = [&](int k) {
        cuda::lrn_backward(ls, p, xs[k].data<float>(), ys[k].data<float>(), scales[k].data<float>(),
                           dys[k].data<float>(), dxs[k].data<float>(), v.second, ctx.stream());
      };
      poison(ctx, ys);
      poison(ctx, scales);
      poison(ctx, dxs);
      for (int k = 0; k < copies; ++k) forward(k);
      backward(0);
      row.version = v.first;
      row.pass = "fwd";
      row.rel_error = worst_error(ctx, {&ys[0], &scales[0]}, {&y_ref, &scale_ref});
      row.bytes = 3 * tensor;
      time_row(ctx, options, table, row, [&](int i) { forward(i % copies); });
      row.pass = "bwd";
      row.rel_error = worst_error(ctx, {&dxs[0]}, {&dx_ref});
      row.bytes = 5 * tensor;
      time_row(ctx, options, table, row, [&](int i) { backward(i % copies); });
    }
  }
  return table.status();
}

int bench_softmax(Context& ctx, const Options& options, std::ostream& out) {
  if (options.math == "bf16") {
    throw Error("crema bench softmax: the softmax runs f32 tensors only (no --math bf16)");
  }
  const auto versions = pick_versions<cuda::SoftmaxVersion>(
      options, "softmax",
      {{"thread_per_position", cuda::SoftmaxVersion::thread_per_position},
       {"warp_per_position", cuda::SoftmaxVersion::warp_per_position}});
  Table table = open_table(ctx, "f32", out);
  Random random(5);
  std::vector<RowsShape> shapes = {{4096, 1000}, {256, 32000}};
  if (!options.shapes.empty()) shapes.clear();
  for (const std::string& text : options.shapes) shapes.push_back(parse_rows_shape(text));
  for (const RowsShape& s : shapes) {
    const Shape shape{s.N, s.C};
    const Input x = make_input(shape, DType::f32, Layout::nchw, random, -8.0, 8.0);
    const Input dy = make_input(shape, DType::f32, Layout::nchw, random, -1.0, 1.0);
    std::vector<double> y_ref(x.exact.size());
    kernels::ref::softmax_forward(s.N, s.C, int64_t(1), x.exact.data(), y_ref.data());
    const double tensor = double(x.exact.size()) * 4.0;
    const int copies = rotation_copies(size_t(3 * tensor));
    std::vector<Tensor> xs, dys, ys, dxs;
    for (int k = 0; k < copies; ++k) {
      xs.push_back(upload(ctx, x.host));
      dys.push_back(upload(ctx, dy.host));
      ys.push_back(ctx.empty(shape));
      dxs.push_back(ctx.empty(shape));
    }
    Row row;
    row.shape = s.str() + " f32";
    for (const auto& v : versions) {
      // 1e-5 plus the worst-case rounding of the float sums (exp's and dy * y's): u = 2^-24 per
      // term added in sequence, C of them in one thread, C/32 per lane then 5 butterfly steps in a
      // warp (3.4e-5 observed for C = 32000 in sequence, 1e-6 by warp).
      const bool one_thread = v.second == cuda::SoftmaxVersion::thread_per_position;
      const double in_sequence = one_thread ? double(s.C) : std::ceil(double(s.C) / 32) + 5;
      row.tolerance = 1e-5 + in_sequence * std::ldexp(1.0, -24);
      const auto forward = [&](int k) {
        cuda::softmax_forward(s.N, s.C, 1, xs[k].data<float>(), ys[k].data<float>(), v.second,
                              ctx.stream());
      };
      const auto backward = [&](int k) {
        cuda::softmax_backward(s.N, s.C, 1, ys[k].data<float>(), dys[k].data<float>(),
                               dxs[k].data<float>(), v.second, ctx.stream());
      };
      poison(ctx, ys);
      poison(ctx, dxs);
      for (int k = 0; k < copies; ++k) forward(k);
      row.version = v.first;
      row.pass = "fwd";
      row.rel_error = worst_error(ctx, {&ys[0]}, {&y_ref});
      // The backward's reference reads the device's y, so that it checks the backward alone.
      const std::vector<double> y_got = download(ctx, ys[0]);
      std::vector<double> dx_ref(x.exact.size());
      kernels::ref::softmax_backward(s.N, s.C, int64_t(1), y_got.data(), dy.exact.data(),
                                     dx_ref.data());
      backward(0);
      row.bytes = 2 * tensor;
      time_row(ctx, options, table, row, [&](int i) { forward(i % copies); });
      row.pass = "bwd";
      row.rel_error = worst_error(ctx, {&dxs[0]}, {&dx_ref});
      row.bytes = 3 * tensor;
      time_row(ctx, options, table, row, [&](int i) { backward(i % copies); });
    }
  }
  return table.status();
}

}  // namespace crema::bench
