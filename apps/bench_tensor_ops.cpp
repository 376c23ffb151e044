// crema bench op-tensor | reduce-tensor | transform-tensor | scale | cast | layout: the tensor
// operations (cuDNN's cudnnOpTensor, cudnnReduceTensor, cudnnTransformTensor), the Scale layer's
// per-channel multiply, dtype casts and NCHW <-> NHWC, checked against ref<double> (or, for
// cast, layout and transform, the exact result: tolerance 0), then timed. op-tensor,
// reduce-tensor, transform-tensor and scale's sums call every CUDA version (or --version's) on
// the plan the Tensor-level call would build, so one run shows each rung beside production's
// (`best`); the others go through their Tensor-level calls. The %peak column is of the copy
// bandwidth, measured first; bytes are the fewest one call must move (T: one tensor's bytes).
//
//   op-tensor         add: c = a + b, b [1, C, 1, 1] broadcast (2T: a read, c written);
//                     mul: c = a * b, b of c's shape (3T)
//   reduce-tensor     sum over H x W into [N, C, 1, 1]; amax over everything into [1, 1, 1, 1]
//                     (T read each)
//   transform-tensor  y = x.permute([0, 2, 3, 1]) (NCHW -> NHWC by the general tensor op: 2T)
//   scale             y = x * scale[c] + bias[c] (Caffe's Scale with a bias: 2T); the backward's
//                     parameter sums dscale = sum dy * x, dbias = sum dy (channel_reduce: 2T read)
//   cast              f32 -> bf16 and bf16 -> f32 (T + T/2, T the f32 tensor's bytes)
//   layout            nchw_to_nhwc and nhwc_to_nchw (kernels/layout: 2T)
//
// f32 storage (cast: both directions). Shapes N,C,H,W (default ResNet-50's stage-1 activations at
// batch 64). PyTorch's peer on the same shapes: scripts/bench/peer_memory_ops.py.
#include <limits>
#include <ostream>
#include <string>
#include <vector>

#include "apps/bench.h"
#include "apps/bench_memory_bound.h"
#include "core/random.h"
#include "kernels/cast/cast.h"
#include "kernels/elementwise/elementwise.h"
#include "kernels/layout/layout.h"
#include "kernels/scale/scale.h"
#include "kernels/tensor_ops/tensor_ops.h"

namespace crema::bench {
namespace {

namespace ref = kernels::ref;

const std::vector<BatchNormShape4> kTensorShapes = {{64, 256, 56, 56}};

// A row for shape s of the f32 tensors, checked (rel_error) and printed by time_row.
Row row_for(const BatchNormShape4& s, const std::string& pass, const std::string& version,
            double rel_error, double tolerance, double bytes) {
  Row row;
  row.shape = s.str() + " f32";
  row.pass = pass;
  row.version = version;
  row.rel_error = rel_error;
  row.tolerance = tolerance;
  row.bytes = bytes;
  return row;
}

// `count` device copies of a host tensor, enough to keep timed calls out of L2 together with the
// others (rotation_copies of the working set).
std::vector<Tensor> copies_of(Context& ctx, const Tensor& host, int count) {
  std::vector<Tensor> out;
  for (int k = 0; k < count; ++k) out.push_back(upload(ctx, host));
  return out;
}

}  // namespace

int bench_op_tensor(Context& ctx, const Options& options, std::ostream& out) {
  using V = kernels::cuda::OpTensorVersion;
  const Versions<V> versions = pick_versions<V>(
      options, "op-tensor", {{"elementwise", V::elementwise}, {"row_vectors", V::row_vectors}});
  Table table = open_table(ctx, "f32", out);
  Random random(11);
  for (const BatchNormShape4& s : shapes_of(options, kTensorShapes)) {
    const Shape shape{s.N, s.C, s.H, s.W}, channel{1, s.C, 1, 1};
    const Input a = make_input(shape, DType::f32, Layout::nchw, random, -1.0, 1.0);
    const Input b = make_input(shape, DType::f32, Layout::nchw, random, -1.0, 1.0);
    const Input bc = make_input(channel, DType::f32, Layout::nchw, random, -1.0, 1.0);
    const double tensor = double(a.exact.size()) * 4;
    const int copies = rotation_copies(size_t(3 * tensor));
    std::vector<Tensor> as = copies_of(ctx, a.host, copies), bs = copies_of(ctx, b.host, copies);
    std::vector<Tensor> cs = copies_of(ctx, a.host, copies);
    const Tensor b_channel = upload(ctx, bc.host);
    for (const kernels::OpTensorOp op : {kernels::OpTensorOp::add, kernels::OpTensorOp::mul}) {
      const bool broadcast = op == kernels::OpTensorOp::add;
      const Input& bin = broadcast ? bc : b;
      std::vector<double> want(a.exact.size());
      ref::op_tensor<double>(op, 4, shape.data(), (broadcast ? channel : shape).data(), 1.0,
                             a.exact.data(), 1.0, bin.exact.data(), 0.0, want.data());
      const kernels::BroadcastPlan plan =
          kernels::make_broadcast_plan(shape, broadcast ? channel : shape);
      for (const auto& [name, version] : versions) {
        const V v = version;
        auto call = [&, v](int k) {
          const Tensor& bk = broadcast ? b_channel : bs[size_t(k)];
          kernels::cuda::op_tensor(op, plan, 1.0f, as[size_t(k)].data<float>(), 1.0f,
                                   bk.data<float>(), 0.0f, cs[size_t(k)].data<float>(), v,
                                   ctx.stream());
        };
        kernels::fill(ctx, cs[0], std::numeric_limits<float>::quiet_NaN());
        call(0);
        Row row =
            row_for(s, std::string(kernels::op_tensor_op_name(op)) + (broadcast ? " b[C]" : ""),
                    name, worst_error(ctx, {&cs[0]}, {&want}), tolerance_of(DType::f32),
                    (broadcast ? 2 : 3) * tensor);
        time_row(ctx, options, table, row, [&](int i) { call(i % copies); });
      }
    }
  }
  return table.status();
}

int bench_reduce_tensor(Context& ctx, const Options& options, std::ostream& out) {
  using V = kernels::cuda::ReduceTensorVersion;
  const Versions<V> versions = pick_versions<V>(
      options, "reduce-tensor", {{"block_per_output", V::block_per_output}, {"split", V::split}});
  Table table = open_table(ctx, "f32", out);
  Random random(12);
  for (const BatchNormShape4& s : shapes_of(options, kTensorShapes)) {
    const Shape shape{s.N, s.C, s.H, s.W};
    const Input x = make_input(shape, DType::f32, Layout::nchw, random, -1.0, 1.0);
    const double tensor = double(x.exact.size()) * 4;
    const int copies = rotation_copies(size_t(tensor));
    const std::vector<Tensor> xs = copies_of(ctx, x.host, copies);
    struct Case {
      kernels::ReduceOp op;
      Shape y_shape;
      const char* what;
    };
    for (const Case& c : {Case{kernels::ReduceOp::sum, {s.N, s.C, 1, 1}, "sum over HxW"},
                          Case{kernels::ReduceOp::amax, {1, 1, 1, 1}, "amax over all"}}) {
      std::vector<double> want(size_t(c.y_shape[0] * c.y_shape[1]));
      ref::reduce_tensor<double>(c.op, 4, shape.data(), c.y_shape.data(), 1.0, x.exact.data(), 0.0,
                                 want.data(), nullptr);
      const kernels::ReducePlan plan = kernels::make_reduce_plan(shape, c.y_shape);
      Tensor y = ctx.empty(c.y_shape);
      for (const auto& [name, version] : versions) {
        const V v = version;
        const size_t bytes = kernels::cuda::reduce_tensor_workspace_bytes(plan, v);
        Tensor workspace = ctx.empty({int64_t(bytes / sizeof(float)) + 1});
        auto call = [&, v](int k) {
          kernels::cuda::reduce_tensor(c.op, plan, 1.0f, xs[size_t(k)].data<float>(), 0.0f,
                                       y.data<float>(), nullptr, workspace.data<float>(), v,
                                       ctx.stream());
        };
        kernels::fill(ctx, y, std::numeric_limits<float>::quiet_NaN());
        call(0);
        Row row = row_for(s, c.what, name, worst_error(ctx, {&y}, {&want}),
                          tolerance_of(DType::f32), tensor);
        row.workspace_bytes = double(bytes);
        time_row(ctx, options, table, row, [&](int i) { call(i % copies); });
      }
    }
  }
  return table.status();
}

int bench_transform_tensor(Context& ctx, const Options& options, std::ostream& out) {
  using V = kernels::cuda::TransformVersion;
  const Versions<V> versions = pick_versions<V>(options, "transform-tensor",
                                                {{"index_map", V::index_map}, {"tiled", V::tiled}});
  Table table = open_table(ctx, "f32", out);
  Random random(13);
  const std::vector<int> order{0, 2, 3, 1};
  for (const BatchNormShape4& s : shapes_of(options, kTensorShapes)) {
    const Shape shape{s.N, s.C, s.H, s.W};
    const Input x = make_input(shape, DType::f32, Layout::nchw, random, -1.0, 1.0);
    const double tensor = double(x.exact.size()) * 4;
    const int copies = rotation_copies(size_t(2 * tensor));
    const std::vector<Tensor> xs = copies_of(ctx, x.host, copies);
    std::vector<Tensor> ys;
    for (int k = 0; k < copies; ++k) ys.push_back(ctx.empty({s.N, s.H, s.W, s.C}));
    std::vector<double> want(x.exact.size());
    ref::transform_tensor<double, double>(4, shape.data(), order.data(), 1.0, x.exact.data(), 0.0,
                                          want.data());
    const kernels::IndexMap map = kernels::make_permute_map(shape, order);
    for (const auto& [name, version] : versions) {
      const V v = version;
      auto call = [&, v](int k) {
        kernels::cuda::transform_tensor(map, shape_numel(shape), 1.0f, xs[size_t(k)].data<float>(),
                                        0.0f, ys[size_t(k)].data<float>(), v, ctx.stream());
      };
      kernels::fill(ctx, ys[0], std::numeric_limits<float>::quiet_NaN());
      call(0);
      Row row =
          row_for(s, "nchw->nhwc", name, worst_error(ctx, {&ys[0]}, {&want}), 0.0, 2 * tensor);
      time_row(ctx, options, table, row, [&](int i) { call(i % copies); });
    }
  }
  return table.status();
}

int bench_scale(Context& ctx, const Options& options, std::ostream& out) {
  Table table = open_table(ctx, "f32", out);
  Random random(14);
  for (const BatchNormShape4& s : shapes_of(options, kTensorShapes)) {
    const Shape shape{s.N, s.C, s.H, s.W};
    const int64_t inner = s.H * s.W;
    const Input x = make_input(shape, DType::f32, Layout::nchw, random, -1.0, 1.0);
    const Input dy = make_input(shape, DType::f32, Layout::nchw, random, -1.0, 1.0);
    const Input sc = make_input({s.C}, DType::f32, Layout::nchw, random, 0.5, 1.5);
    const Input bi = make_input({s.C}, DType::f32, Layout::nchw, random, -0.5, 0.5);
    const double tensor = double(x.exact.size()) * 4;
    const int copies = rotation_copies(size_t(2 * tensor));
    std::vector<Tensor> xs = copies_of(ctx, x.host, copies), dys = copies_of(ctx, dy.host, copies);
    std::vector<Tensor> ys = copies_of(ctx, x.host, copies);
    const Tensor scale = upload(ctx, sc.host), bias = upload(ctx, bi.host);
    Tensor dscale = ctx.zeros({s.C}), dbias = ctx.zeros({s.C});

    std::vector<double> y_ref(x.exact.size()), ds_ref(size_t(s.C)), db_ref(size_t(s.C));
    ref::scale_forward<double>(s.N, s.C, inner, x.exact.data(), sc.exact.data(), bi.exact.data(),
                               y_ref.data());
    ref::channel_reduce<double>(s.N, s.C, inner, dy.exact.data(), x.exact.data(), false,
                                ds_ref.data());
    ref::channel_reduce<double>(s.N, s.C, inner, dy.exact.data(), nullptr, false, db_ref.data());

    kernels::scale_forward(ctx, xs[0], &scale, &bias, 1, 1, ys[0]);
    Row fwd = row_for(s, "fwd", "elementwise", worst_error(ctx, {&ys[0]}, {&y_ref}),
                      tolerance_of(DType::f32), 2 * tensor);
    time_row(ctx, options, table, fwd, [&](int i) {
      const size_t k = size_t(i % copies);
      kernels::scale_forward(ctx, xs[k], &scale, &bias, 1, 1, ys[k]);
    });
    using V = kernels::cuda::ReduceVersion;
    const Versions<V> versions = pick_versions<V>(
        options, "scale",
        {{"block_per_channel", V::block_per_channel}, {"split", V::split}, {"planes", V::planes}});
    for (const auto& [name, version] : versions) {
      const V v = version;
      const size_t bytes = kernels::cuda::channel_reduce_workspace_bytes(s.N, s.C, inner, v);
      Tensor workspace = ctx.empty({int64_t(bytes / sizeof(float)) + 1});
      auto sums = [&, v](size_t k) {
        kernels::cuda::channel_reduce(s.N, s.C, inner, dys[k].data<float>(), xs[k].data<float>(),
                                      false, dscale.data<float>(), workspace.data<float>(), v,
                                      ctx.stream());
        kernels::cuda::channel_reduce(
            s.N, s.C, inner, dys[k].data<float>(), static_cast<const float*>(nullptr), false,
            dbias.data<float>(), workspace.data<float>(), v, ctx.stream());
      };
      kernels::fill(ctx, dscale, std::numeric_limits<float>::quiet_NaN());
      kernels::fill(ctx, dbias, std::numeric_limits<float>::quiet_NaN());
      sums(0);
      Row bwd =
          row_for(s, "bwd sums", name, worst_error(ctx, {&dscale, &dbias}, {&ds_ref, &db_ref}),
                  tolerance_of(DType::f32), 2 * tensor);
      bwd.workspace_bytes = double(bytes);
      time_row(ctx, options, table, bwd, [&](int i) { sums(size_t(i % copies)); });
    }
  }
  return table.status();
}

int bench_cast(Context& ctx, const Options& options, std::ostream& out) {
  Table table = open_table(ctx, "f32 <-> bf16", out);
  Random random(15);
  Context cpu;
  for (const BatchNormShape4& s : shapes_of(options, kTensorShapes)) {
    const Shape shape{s.N, s.C, s.H, s.W};
    const Input x = make_input(shape, DType::f32, Layout::nchw, random, -4.0, 4.0);
    const double tensor = double(x.exact.size()) * 4;
    for (const bool narrow : {true, false}) {
      // The source: f32 values, or their bf16 rounding; the exact result: the CPU's cast (the
      // reference conversions of core/float16.h), whose bits CUDA must give.
      const Tensor source = narrow ? x.host : kernels::cast_to(cpu, x.host, DType::bf16);
      const DType to = narrow ? DType::bf16 : DType::f32;
      const std::vector<float> wide = kernels::cast_to(cpu, source, to).to_vector();
      const std::vector<double> want(wide.begin(), wide.end());
      const int copies = rotation_copies(size_t(1.5 * tensor));
      const std::vector<Tensor> xs = copies_of(ctx, source, copies);
      std::vector<Tensor> ys;
      for (int k = 0; k < copies; ++k) ys.push_back(ctx.empty(shape, to));
      kernels::cast(ctx, xs[0], ys[0]);
      Row row = row_for(s, narrow ? "f32->bf16" : "bf16->f32", "vectorized",
                        worst_error(ctx, {&ys[0]}, {&want}), 0.0, 1.5 * tensor);
      time_row(ctx, options, table, row, [&](int i) {
        const size_t k = size_t(i % copies);
        kernels::cast(ctx, xs[k], ys[k]);
      });
    }
  }
  return table.status();
}

int bench_layout(Context& ctx, const Options& options, std::ostream& out) {
  Table table = open_table(ctx, "f32", out);
  Random random(16);
  for (const BatchNormShape4& s : shapes_of(options, kTensorShapes)) {
    const Input x = make_input({s.N, s.C, s.H, s.W}, DType::f32, Layout::nchw, random, -1.0, 1.0);
    const double tensor = double(x.exact.size()) * 4;
    const int copies = rotation_copies(size_t(2 * tensor));
    for (const bool to_nhwc : {true, false}) {
      // nchw -> nhwc: B = N, R = C, S = H*W; nhwc -> nchw: R = H*W, S = C (the same values,
      // read as an [N, H, W, C] tensor).
      const int64_t R = to_nhwc ? s.C : s.H * s.W, S = to_nhwc ? s.H * s.W : s.C;
      const Shape in_shape = to_nhwc ? Shape{s.N, s.C, s.H, s.W} : Shape{s.N, s.H, s.W, s.C};
      const Shape out_shape = to_nhwc ? Shape{s.N, s.H, s.W, s.C} : Shape{s.N, s.C, s.H, s.W};
      const Tensor host = x.host.view(in_shape);
      std::vector<double> want(x.exact.size());
      ref::batched_transpose<double>(s.N, R, S, x.exact.data(), want.data());
      const std::vector<Tensor> xs = copies_of(ctx, host, copies);
      std::vector<Tensor> ys;
      for (int k = 0; k < copies; ++k) ys.push_back(ctx.empty(out_shape));
      auto call = [&](size_t k) {
        if (to_nhwc) {
          kernels::nchw_to_nhwc(ctx, xs[k], ys[k]);
        } else {
          kernels::nhwc_to_nchw(ctx, xs[k], ys[k]);
        }
      };
      call(0);
      Row row = row_for(s, to_nhwc ? "nchw->nhwc" : "nhwc->nchw", "tiled",
                        worst_error(ctx, {&ys[0]}, {&want}), 0.0, 2 * tensor);
      time_row(ctx, options, table, row, [&](int i) { call(size_t(i % copies)); });
    }
  }
  return table.status();
}

}  // namespace crema::bench
