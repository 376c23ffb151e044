// crema bench loss | accuracy | optimizer | im2col | lcn: the memory-bound ops of a training step
// that are not layers' activations, through their Tensor-level calls (im2col: its CUDA call, which
// has no Tensor level), checked against ref<double> on the same exact inputs, then timed. The
// %peak column is of the copy bandwidth, measured first; bytes are the fewest one call must move
// (T: one [N, C, H, W] f32 tensor's bytes).
//
//   loss       softmax with cross-entropy (SoftmaxWithLoss) over C of logits [N, C, H, W], one
//              label per position (a segmentation net's loss): forward (logits read, prob
//              written, labels read: 2T + T/C), backward (prob and labels read, dlogits written)
//   accuracy   top-1 over C of the same scores and labels (T + T/C read)
//   optimizer  one fused update of a CIFAR ResNet-18's 21 weight tensors (11.2M parameters):
//              sgd (momentum 0.9, decay 5e-4: w, g, v read, w, v, g written: 6 x 4 bytes a
//              parameter) and adam (w, g, m1, m2 read and written: 8 x 4 bytes); --shape ignored
//   im2col     3x3, pad 1, stride 1 patches of im [N, C, H, W] into col [9C, N*H*W] (T read, 9T
//              written)
//   lcn        local contrast normalization, 5 x 5 windows: forward (2T), backward (3T: x and dy
//              read, dx written)
//
// f32 only. Shapes N,C,H,W. PyTorch's peer on the same shapes: scripts/bench/peer_memory_ops.py.
#include <cmath>
#include <limits>
#include <ostream>
#include <string>
#include <vector>

#include "apps/bench.h"
#include "apps/bench_memory_bound.h"
#include "core/random.h"
#include "kernels/accuracy/accuracy.h"
#include "kernels/elementwise/elementwise.h"
#include "kernels/im2col/im2col.h"
#include "kernels/lcn/lcn.h"
#include "kernels/loss/softmax_cross_entropy.h"
#include "kernels/optimizers/optimizers.h"

namespace crema::bench {
namespace {

namespace ref = kernels::ref;

// A PASCAL VOC segmentation net's logits at batch 8: 21 classes over 512 x 512.
const std::vector<BatchNormShape4> kLossShapes = {{8, 21, 512, 512}};
// ResNet's first stage at batch 32 (im2col's col: 231 MB).
const std::vector<BatchNormShape4> kIm2colShapes = {{32, 64, 56, 56}};
const std::vector<BatchNormShape4> kLcnShapes = {{32, 64, 56, 56}};

Row row_for(const BatchNormShape4& s, const std::string& pass, const std::string& version,
            double rel_error, double bytes) {
  Row row;
  row.shape = s.str() + " f32";
  row.pass = pass;
  row.version = version;
  row.rel_error = rel_error;
  row.tolerance = tolerance_of(DType::f32);
  row.bytes = bytes;
  return row;
}

// One label per position of [N, C, H, W] scores: integers in [0, C), as floats.
Input make_labels(const BatchNormShape4& s, Random& random) {
  Tensor labels({s.N * s.H * s.W});
  for (int64_t i = 0; i < labels.numel(); ++i) {
    labels.data<float>()[i] = float(random.below(uint64_t(s.C)));
  }
  const std::vector<float> v = labels.to_vector();
  return {labels, std::vector<double>(v.begin(), v.end())};
}

// The CIFAR ResNet-18's convolution and fc weights (out, in, kh, kw).
std::vector<Shape> resnet18_cifar_weights() {
  std::vector<Shape> w{{64, 3, 3, 3}};
  for (int i = 0; i < 4; ++i) w.push_back({64, 64, 3, 3});
  for (int64_t c : {128, 256, 512}) {
    w.push_back({c, c / 2, 3, 3});
    for (int i = 0; i < 3; ++i) w.push_back({c, c, 3, 3});
    w.push_back({c, c / 2, 1, 1});
  }
  w.push_back({10, 512});
  return w;
}

}  // namespace

int bench_loss(Context& ctx, const Options& options, std::ostream& out) {
  Table table = open_table(ctx, "f32", out);
  Random random(21);
  for (const BatchNormShape4& s : shapes_of(options, kLossShapes)) {
    const Shape shape{s.N, s.C, s.H, s.W};
    const int64_t inner = s.H * s.W, positions = s.N * inner;
    const Input x = make_input(shape, DType::f32, Layout::nchw, random, -3.0, 3.0);
    const Input labels = make_labels(s, random);
    const kernels::SoftmaxLossOptions o;  // axis 1, no ignore label, normalized by the count
    std::vector<double> prob_ref(x.exact.size()), dx_ref(x.exact.size());
    const std::vector<double> loss_ref{
        ref::softmax_cross_entropy_forward<double>(
            s.N, s.C, inner, x.exact.data(), labels.exact.data(), o, prob_ref.data(), nullptr) /
        double(positions)};
    ref::softmax_cross_entropy_backward<double>(s.N, s.C, inner, prob_ref.data(),
                                                labels.exact.data(), o, 1.0 / double(positions),
                                                dx_ref.data());
    const double tensor = double(x.exact.size()) * 4, label_bytes = double(positions) * 4;
    const Tensor logits = upload(ctx, x.host), label = upload(ctx, labels.host);
    Tensor prob = ctx.empty(shape), dx = ctx.empty(shape), loss = ctx.empty({1});
    const Tensor top_grad = upload(ctx, Tensor::from_vector({1}, {1.0f}));
    kernels::softmax_cross_entropy_forward(ctx, logits, label, prob, loss, o);
    kernels::softmax_cross_entropy_backward(ctx, prob, label, top_grad, o, dx);
    Row fwd =
        row_for(s, "fwd", "softmax_with_loss",
                worst_error(ctx, {&prob, &loss}, {&prob_ref, &loss_ref}), 2 * tensor + label_bytes);
    time_row(ctx, options, table, fwd, [&](int) {
      kernels::softmax_cross_entropy_forward(ctx, logits, label, prob, loss, o);
    });
    Row bwd = row_for(s, "bwd", "elementwise", worst_error(ctx, {&dx}, {&dx_ref}),
                      2 * tensor + label_bytes);
    time_row(ctx, options, table, bwd, [&](int) {
      kernels::softmax_cross_entropy_backward(ctx, prob, label, top_grad, o, dx);
    });
  }
  return table.status();
}

int bench_accuracy(Context& ctx, const Options& options, std::ostream& out) {
  Table table = open_table(ctx, "f32", out);
  Random random(22);
  for (const BatchNormShape4& s : shapes_of(options, kLossShapes)) {
    const Shape shape{s.N, s.C, s.H, s.W};
    const int64_t inner = s.H * s.W;
    const Input x = make_input(shape, DType::f32, Layout::nchw, random, -3.0, 3.0);
    const Input labels = make_labels(s, random);
    const kernels::AccuracyCount count =
        ref::accuracy<double>(s.N, s.C, inner, x.exact.data(), labels.exact.data(), 1, false, -1);
    const std::vector<double> want{double(count.correct) / double(count.counted)};
    const Tensor scores = upload(ctx, x.host), label = upload(ctx, labels.host);
    Tensor result = ctx.empty({1});
    const kernels::AccuracyOptions o;  // top-1 over axis 1
    kernels::accuracy(ctx, scores, label, o, result);
    Row row = row_for(s, "top-1", "per_position", worst_error(ctx, {&result}, {&want}),
                      double(x.exact.size()) * 4 + double(labels.exact.size()) * 4);
    time_row(ctx, options, table, row,
             [&](int) { kernels::accuracy(ctx, scores, label, o, result); });
  }
  return table.status();
}

int bench_optimizer(Context& ctx, const Options& options, std::ostream& out) {
  Table table = open_table(ctx, "f32", out);
  Random random(23);
  const std::vector<Shape> shapes = resnet18_cifar_weights();
  constexpr double kLr = 0.01, kDecay = 5e-4;
  kernels::OptimizerRule sgd;
  sgd.type = kernels::OptimizerType::sgd, sgd.momentum = 0.9;
  kernels::OptimizerRule adam;
  adam.type = kernels::OptimizerType::adam;
  for (const kernels::OptimizerRule& rule : {sgd, adam}) {
    const bool is_sgd = rule.type == kernels::OptimizerType::sgd;
    const int slots = is_sgd ? 1 : 2;
    // Per parameter: w, g and the state on the device; the references after one step.
    std::vector<Tensor> w, g, state[2];
    std::vector<std::vector<double>> w_ref, s_ref[2];
    double parameters = 0;
    for (const Shape& shape : shapes) {
      const Input wi = make_input(shape, DType::f32, Layout::nchw, random, -0.5, 0.5);
      const Input gi = make_input(shape, DType::f32, Layout::nchw, random, -0.1, 0.1);
      const size_t n = wi.exact.size();
      parameters += double(n);
      std::vector<double> wr = wi.exact, s0(n, 0.0), s1(n, 0.0);
      if (is_sgd) {
        ref::sgd_update<double>(int64_t(n), wr.data(), gi.exact.data(), s0.data(), kLr, 0.9,
                                kDecay);
      } else {
        ref::adam_update<double>(int64_t(n), wr.data(), gi.exact.data(), s0.data(), s1.data(), kLr,
                                 0.9, 0.999, 1e-8, kDecay, false, 1);
      }
      w.push_back(upload(ctx, wi.host));
      g.push_back(upload(ctx, gi.host));
      for (int k = 0; k < slots; ++k) state[k].push_back(ctx.zeros(shape));
      w_ref.push_back(std::move(wr));
      s_ref[0].push_back(std::move(s0));
      s_ref[1].push_back(std::move(s1));
    }
    std::vector<kernels::OptimizerTensorSet> sets;
    for (size_t i = 0; i < shapes.size(); ++i) {
      sets.push_back({&w[i],
                      &g[i],
                      {&state[0][i], slots > 1 ? &state[1][i] : nullptr, nullptr},
                      float(kLr),
                      float(kDecay)});
    }
    kernels::optimizer_update(ctx, rule, 1, sets);
    std::vector<const Tensor*> got;
    std::vector<const std::vector<double>*> want;
    for (size_t i = 0; i < shapes.size(); ++i) {
      got.push_back(&w[i]), want.push_back(&w_ref[i]);
      for (int k = 0; k < slots; ++k) got.push_back(&state[k][i]), want.push_back(&s_ref[k][i]);
    }
    Row row;
    row.shape = "resnet18-cifar " + std::to_string(shapes.size()) + " tensors f32";
    row.pass = is_sgd ? "sgd momentum" : "adam";
    row.version = "one_launch";
    row.rel_error = worst_error(ctx, got, want);
    row.tolerance = tolerance_of(DType::f32);
    row.bytes = parameters * 4 * (is_sgd ? 6 : 8);
    // Later steps see zeroed gradients (the update consumes them): the same traffic.
    int64_t step = 1;
    time_row(ctx, options, table, row,
             [&](int) { kernels::optimizer_update(ctx, rule, ++step, sets); });
  }
  return table.status();
}

int bench_im2col(Context& ctx, const Options& options, std::ostream& out) {
  Table table = open_table(ctx, "f32", out);
  Random random(24);
  for (const BatchNormShape4& s : shapes_of(options, kIm2colShapes)) {
    const kernels::Im2colGeometry g{s.C, s.H, s.W, 3, 3, 1, 1, 1, 1, 1, 1};
    const int64_t image = s.C * s.H * s.W, cols = g.col_cols(), ldcol = s.N * cols;
    const Input x = make_input({s.N, s.C, s.H, s.W}, DType::f32, Layout::nchw, random, -1.0, 1.0);
    // col [C*R*S, N*P*Q]: image n's columns n*P*Q .. (n+1)*P*Q - 1.
    std::vector<double> want(size_t(g.col_rows() * ldcol)), one(size_t(g.col_rows() * cols));
    for (int64_t n = 0; n < s.N; ++n) {
      ref::im2col<double>(g, x.exact.data() + n * image, one.data());
      for (int64_t r = 0; r < g.col_rows(); ++r) {
        for (int64_t c = 0; c < cols; ++c) {
          want[size_t(r * ldcol + n * cols + c)] = one[size_t(r * cols + c)];
        }
      }
    }
    const Tensor im = upload(ctx, x.host);
    Tensor col = ctx.empty({g.col_rows(), ldcol});
    using V = kernels::cuda::Im2colVersion;
    const Versions<V> versions = pick_versions<V>(
        options, "im2col",
        {{"thread_per_entry", V::thread_per_entry}, {"row_vectors", V::row_vectors}});
    for (const auto& [name, version] : versions) {
      const V v = version;
      auto call = [&, v] {
        kernels::cuda::im2col(g, s.N, im.data<float>(), image, col.data<float>(), ldcol, v,
                              ctx.stream());
      };
      kernels::fill(ctx, col, std::numeric_limits<float>::quiet_NaN());
      call();
      Row row = row_for(s, "3x3 p1 s1", name, worst_error(ctx, {&col}, {&want}),
                        double(x.exact.size()) * 4 + double(want.size()) * 4);
      time_row(ctx, options, table, row, [&](int) { call(); });
    }
  }
  return table.status();
}

int bench_lcn(Context& ctx, const Options& options, std::ostream& out) {
  Table table = open_table(ctx, "f32", out);
  Random random(25);
  const kernels::LcnParams p;  // 5 x 5, cuDNN's defaults
  for (const BatchNormShape4& s : shapes_of(options, kLcnShapes)) {
    const Shape shape{s.N, s.C, s.H, s.W};
    const kernels::LcnShape ls{s.N, s.C, s.H, s.W};
    const Input x = make_input(shape, DType::f32, Layout::nchw, random, -1.0, 1.0);
    const Input dy = make_input(shape, DType::f32, Layout::nchw, random, -1.0, 1.0);
    std::vector<double> y_ref(x.exact.size()), dx_ref(x.exact.size());
    ref::lcn_forward<double>(ls, p, 1.0, x.exact.data(), 0.0, y_ref.data());
    ref::lcn_backward<double>(ls, p, 1.0, x.exact.data(), dy.exact.data(), 0.0, dx_ref.data());
    const double tensor = double(x.exact.size()) * 4;
    const int copies = rotation_copies(size_t(3 * tensor));
    std::vector<Tensor> xs, dys, ys, dxs;
    for (int k = 0; k < copies; ++k) {
      xs.push_back(upload(ctx, x.host));
      dys.push_back(upload(ctx, dy.host));
      ys.push_back(ctx.empty(shape));
      dxs.push_back(ctx.empty(shape));
    }
    kernels::lcn_forward(ctx, p, 1.0, xs[0], 0.0, ys[0]);
    kernels::lcn_backward(ctx, p, 1.0, xs[0], dys[0], 0.0, dxs[0]);
    Row fwd = row_for(s, "fwd 5x5", "box_sums", worst_error(ctx, {&ys[0]}, {&y_ref}), 2 * tensor);
    time_row(ctx, options, table, fwd, [&](int i) {
      const size_t k = size_t(i % copies);
      kernels::lcn_forward(ctx, p, 1.0, xs[k], 0.0, ys[k]);
    });
    Row bwd = row_for(s, "bwd 5x5", "box_sums", worst_error(ctx, {&dxs[0]}, {&dx_ref}), 3 * tensor);
    time_row(ctx, options, table, bwd, [&](int i) {
      const size_t k = size_t(i % copies);
      kernels::lcn_backward(ctx, p, 1.0, xs[k], dys[k], 0.0, dxs[k]);
    });
  }
  return table.status();
}

}  // namespace crema::bench
