// crema bench layer-norm | global-pool: the memory-bound layers of ConvNeXt and EfficientNet
// through their Tensor-level calls (what the layers run), checked against ref<double> on the same
// exact inputs, then timed one pass at a time.
//
//   layer-norm   x [N, C, H, W] normalized over C (LayerNorm2d; under --layout nhwc the N*H*W rows
//                of C a ConvNeXt block's LayerNorm reads after its Permute), with weight and bias:
//                forward (x -> y, mean, rstd) and backward (x, dy -> dx, dweight, dbias). Bytes:
//                forward 2T (x read, y written), backward 3T (x and dy read, dx written), T the
//                tensor's bytes (statistics and parameters are negligible).
//   global-pool  average pooling of x [N, C, H, W] over H x W (squeeze-excitation's squeeze),
//                forward only (its backward is a broadcast): T read.
//
// Storage: bf16 for --math bf16, f32 otherwise; --layout nchw or nhwc. The %peak column is of
// the device's copy bandwidth, measured first (copy_gbps). PyTorch's peer on the same shapes:
// scripts/bench/peer_memory_bound.py.
#include <cmath>
#include <ostream>
#include <string>
#include <vector>

#include "apps/bench.h"
#include "apps/bench_memory_bound.h"
#include "core/random.h"
#include "kernels/cast/cast.h"
#include "kernels/layer_norm/layer_norm.h"
#include "kernels/pooling/pooling.h"

namespace crema::bench {
namespace {

constexpr float kEps = 1e-6f;  // ConvNeXt's

// ConvNeXt-T's LayerNorms at batch 64 (the stem's and the stages': C = 96 .. 768).
std::vector<BatchNormShape4> default_layer_norm_shapes() {
  return {{64, 96, 56, 56}, {64, 192, 28, 28}, {64, 384, 14, 14}, {64, 768, 7, 7}};
}

// EfficientNet-B0's squeeze-excitation inputs at batch 64 (the first: [64, 32, 112, 112]).
std::vector<BatchNormShape4> default_global_pool_shapes() {
  return {{64, 32, 112, 112}, {64, 96, 56, 56},  {64, 144, 56, 56},
          {64, 240, 28, 28},  {64, 480, 14, 14}, {64, 1152, 7, 7}};
}

}  // namespace

Input make_input(const Shape& shape, DType dtype, Layout layout, Random& random, double low,
                 double high) {
  Tensor values(shape, DType::f32);
  for (int64_t i = 0; i < values.numel(); ++i) {
    values.data<float>()[i] = float(random.uniform(low, high));
  }
  Context cpu;
  Input in{kernels::cast_to(cpu, values, dtype), {}};
  in.host.set_layout(layout);
  const std::vector<float> wide = in.host.to_vector();
  in.exact.assign(wide.begin(), wide.end());
  return in;
}

Tensor upload(Context& ctx, const Tensor& host) {
  Tensor t = ctx.empty(host.shape(), host.dtype());
  t.set_layout(host.layout());
  t.copy_from(host);
  return t;
}

double worst_error(Context& ctx, const std::vector<const Tensor*>& got,
                   const std::vector<const std::vector<double>*>& want) {
  ctx.synchronize();
  double worst = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    const std::vector<float> v = got[i]->to_vector();
    const double e = relative_error(v.data(), want[i]->data(), want[i]->size());
    if (!(e <= worst)) worst = e;  // NaN sticks
  }
  return worst;
}

std::vector<BatchNormShape4> shapes_of(const Options& options,
                                       std::vector<BatchNormShape4> defaults) {
  if (options.shapes.empty()) return defaults;
  std::vector<BatchNormShape4> shapes;
  for (const std::string& text : options.shapes) shapes.push_back(parse_batch_norm_shape(text));
  return shapes;
}

DType storage_of(const Options& options) {
  return options.math == "bf16" ? DType::bf16 : DType::f32;
}

double tolerance_of(DType dtype) {
  return (dtype == DType::bf16 ? std::ldexp(1.0, -8) : 0.0) + 1e-5;
}

std::vector<double> download(Context& ctx, const Tensor& t) {
  ctx.synchronize();
  const std::vector<float> v = t.to_vector();
  return std::vector<double>(v.begin(), v.end());
}

Table open_table(Context& ctx, const std::string& what, std::ostream& out) {
  DevicePeak peak = device_peak(ctx);
  peak.dram_gbps = copy_gbps(ctx);
  out << "copy bandwidth (device to device, read + write): " << int(peak.dram_gbps)
      << " GB/s; the %peak column is of it (" << what << ")\n";
  return Table(out, peak);
}

void time_row(Context& ctx, const Options& options, Table& table, Row row,
              const std::function<void(int)>& launch) {
  row.check = "ref";
  row.peak = "dram";
  if (row.rel_error <= row.tolerance) row.ms = measure_ms(ctx, options, launch);
  table.print(row);
}

int bench_layer_norm(Context& ctx, const Options& options, std::ostream& out) {
  const DType dtype = storage_of(options);
  const Layout layout = options.layout == "nhwc" ? Layout::nhwc : Layout::nchw;
  Table table = open_table(ctx, std::string(dtype_name(dtype)) + " " + options.layout, out);
  Random random(1);
  for (const BatchNormShape4& s : shapes_of(options, default_layer_norm_shapes())) {
    const Shape shape{s.N, s.C, s.H, s.W};
    // Memory order: rows of C (nhwc) or C planes of H*W (nchw); the reference's geometry alike.
    const int64_t outer = layout == Layout::nhwc ? s.N * s.H * s.W : s.N;
    const int64_t inner = layout == Layout::nhwc ? 1 : s.H * s.W, positions = outer * inner;
    const Input x = make_input(shape, dtype, layout, random, -1.0, 2.0);
    const Input dy = make_input(shape, dtype, layout, random, -1.0, 1.0);
    const Input w = make_input({s.C}, DType::f32, Layout::nchw, random, 0.5, 1.5);
    const Input b = make_input({s.C}, DType::f32, Layout::nchw, random, -0.5, 0.5);
    std::vector<double> y_ref(x.exact.size()), dx_ref(x.exact.size()), h(x.exact.size());
    std::vector<double> mean(static_cast<size_t>(positions)), rstd(static_cast<size_t>(positions));
    std::vector<double> dw_ref(size_t(s.C), 0.0), db_ref(size_t(s.C), 0.0);
    kernels::ref::layer_norm_forward(outer, s.C, inner, x.exact.data(), w.exact.data(),
                                     b.exact.data(), kEps, y_ref.data(), mean.data(), rstd.data());
    kernels::ref::layer_norm_backward(outer, s.C, inner, x.exact.data(), dy.exact.data(),
                                      w.exact.data(), mean.data(), rstd.data(), dx_ref.data(),
                                      h.data());
    for (size_t e = 0; e < h.size(); ++e) {
      const size_t c = size_t((int64_t(e) / inner) % s.C);
      dw_ref[c] += dy.exact[e] * h[e];
      db_ref[c] += dy.exact[e];
    }
    const double tensor = double(x.exact.size()) * double(dtype_size(dtype));
    const int copies = rotation_copies(size_t(3 * tensor));
    std::vector<Tensor> xs, dys, ys, dxs;
    for (int k = 0; k < copies; ++k) {
      xs.push_back(upload(ctx, x.host));
      dys.push_back(upload(ctx, dy.host));
      ys.push_back(upload(ctx, x.host));
      dxs.push_back(upload(ctx, x.host));
    }
    const Tensor wg = upload(ctx, w.host), bg = upload(ctx, b.host);
    Tensor m = ctx.empty({positions}), r = ctx.empty({positions});
    Tensor dw = ctx.zeros({s.C}), db = ctx.zeros({s.C});
    kernels::layer_norm_forward(ctx, xs[0], &wg, &bg, 1, kEps, ys[0], m, r);
    kernels::layer_norm_backward(ctx, xs[0], dys[0], &wg, m, r, 1, &dxs[0], &dw, &db);
    const double error =
        worst_error(ctx, {&ys[0], &dxs[0], &dw, &db}, {&y_ref, &dx_ref, &dw_ref, &db_ref});
    for (const bool backward : {false, true}) {
      Row row;
      row.shape = s.str() + " " + dtype_name(dtype) + " " + options.layout;
      row.pass = backward ? "bwd" : "fwd";
      row.version = layout == Layout::nhwc ? "rows" : "columns";
      row.check = "ref";
      row.rel_error = error;
      row.tolerance = tolerance_of(dtype);
      row.bytes = tensor * (backward ? 3 : 2);
      row.peak = "dram";
      if (error <= row.tolerance) {
        row.ms = measure_ms(ctx, options, [&](int i) {
          const int k = i % copies;
          if (backward) {
            kernels::layer_norm_backward(ctx, xs[k], dys[k], &wg, m, r, 1, &dxs[k], &dw, &db);
          } else {
            kernels::layer_norm_forward(ctx, xs[k], &wg, &bg, 1, kEps, ys[k], m, r);
          }
        });
      }
      table.print(row);
    }
  }
  return table.status();
}

int bench_global_pool(Context& ctx, const Options& options, std::ostream& out) {
  const DType dtype = storage_of(options);
  const Layout layout = options.layout == "nhwc" ? Layout::nhwc : Layout::nchw;
  Table table = open_table(ctx, std::string(dtype_name(dtype)) + " " + options.layout, out);
  Random random(2);
  for (const BatchNormShape4& s : shapes_of(options, default_global_pool_shapes())) {
    const Shape shape{s.N, s.C, s.H, s.W};
    const kernels::Pool2dGeometry g{s.N, s.C, s.H, s.W, s.H, s.W, 1, 1, 0, 0, 1, 1};
    const Input x = make_input(shape, dtype, layout, random, 0.5, 1.5);
    std::vector<double> y_ref(size_t(s.N * s.C));
    kernels::ref::pool2d_forward(g, kernels::PoolMode::average, x.exact.data(), y_ref.data(),
                                 static_cast<double*>(nullptr), layout);
    const double tensor = double(x.exact.size()) * double(dtype_size(dtype));
    const int copies = rotation_copies(size_t(tensor));
    std::vector<Tensor> xs;
    for (int k = 0; k < copies; ++k) xs.push_back(upload(ctx, x.host));
    Tensor y = ctx.empty({s.N, s.C, 1, 1}, dtype);
    y.set_layout(layout);
    kernels::pool2d_forward(ctx, g, kernels::PoolMode::average, xs[0], y, nullptr);
    Row row;
    row.shape = s.str() + " " + dtype_name(dtype) + " " + options.layout;
    row.pass = "fwd";
    row.version = s.H * s.W >= kernels::cuda::kGlobalReductionPixels ? "reduction" : "per_output";
    row.check = "ref";
    row.rel_error = worst_error(ctx, {&y}, {&y_ref});
    row.tolerance = tolerance_of(dtype);
    row.bytes = tensor;
    row.peak = "dram";
    if (row.rel_error <= row.tolerance) {
      row.ms = measure_ms(ctx, options, [&](int i) {
        kernels::pool2d_forward(ctx, g, kernels::PoolMode::average, xs[i % copies], y, nullptr);
      });
    }
    table.print(row);
  }
  return table.status();
}

}  // namespace crema::bench
